package judges

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"

	"github.com/kfollower/kfollower/integration/kafka"
)

// Judges are the paths of the installed clients.
type Judges struct {
	Kcat   string // the kcat binary
	Python string // a python3 that can import confluent_kafka
}

var (
	once   sync.Once
	found  Judges
	ensErr error
)

// Ensure installs the judges if they are missing (integration/judges/install,
// under a lock file in the cache directory so parallel test binaries do not
// race) and returns their paths. The result is cached for the process.
func Ensure() (Judges, error) {
	once.Do(func() { found, ensErr = ensure() })
	return found, ensErr
}

func ensure() (Judges, error) {
	cache, err := kafka.CacheDir()
	if err != nil {
		return Judges{}, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Judges{}, fmt.Errorf("creating the cache directory %s: %w", cache, err)
	}
	lock := filepath.Join(cache, ".judges.lock")
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Judges{}, fmt.Errorf("opening the judges lock %s: %w", lock, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return Judges{}, fmt.Errorf("locking %s: %w", lock, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too

	venv := filepath.Join(cache, "judges-venv")
	var out bytes.Buffer
	cmd := exec.Command(script(), venv)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return Judges{}, fmt.Errorf("installing the outside judges (kcat, confluent-kafka) with %s: %w\n%s", script(), err, out.String())
	}
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		return Judges{}, fmt.Errorf("kcat is not on PATH after installing it: %w", err)
	}
	return Judges{Kcat: kcat, Python: filepath.Join(venv, "bin", "python")}, nil
}

// script is the install script beside this file, found from the source path so
// that any package's test binary can call it.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "install")
}
