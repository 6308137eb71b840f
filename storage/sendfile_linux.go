package storage

import (
	"io"
	"syscall"
)

// sendfile writes n bytes of f from pos to w with sendfile(2) when w is a
// plain socket (a *net.TCPConn: a syscall.Conn) and f an OS file: the
// bytes go from the page cache to the socket without a copy through user
// space, as Kafka's FileRecords.writeTo does with FileChannel.transferTo.
// The file position is given explicitly, so concurrent sends of one file
// share nothing. done is false when it cannot be used: the caller copies.
func sendfile(w io.Writer, f file, pos int64, n int) (done bool, _ error) {
	of, ok := f.(osFile)
	if !ok {
		return false, nil
	}
	sc, ok := w.(syscall.Conn)
	if !ok {
		return false, nil
	}
	out, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	in, err := of.File.SyscallConn()
	if err != nil {
		return true, err
	}
	var serr error
	// Control holds f's descriptor open until it returns, even if the
	// segment is closed meanwhile (retention); after a close it fails.
	cerr := in.Control(func(infd uintptr) {
		werr := out.Write(func(outfd uintptr) bool {
			for n > 0 {
				m, err := syscall.Sendfile(int(outfd), int(infd), &pos, min(n, 1<<30))
				if m > 0 {
					n -= m
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until the socket is writable (or the deadline)
				case err == syscall.EINTR:
					continue
				case err != nil:
					serr = err
					return true
				case m == 0:
					serr = io.ErrUnexpectedEOF // the file is shorter than the section: it was truncated
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
	})
	if cerr != nil {
		return true, cerr
	}
	return true, serr
}
