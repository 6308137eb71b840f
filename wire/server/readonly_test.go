package server

import (
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kfollower/kfollower/storage"
)

// The live log and the read-only view serve as they are.
var (
	_ Log = (*storage.Log)(nil)
	_ Log = (*storage.View)(nil)
)

// plainData is bytes, or a struct of int64 fields with no methods (an
// AbortedTxn): values that lead nowhere.
func plainData(t reflect.Type) bool {
	if t.Kind() == reflect.Uint8 {
		return true
	}
	if t.Kind() != reflect.Struct || t.NumMethod() > 0 {
		return false
	}
	for i := range t.NumField() {
		if t.Field(i).Type.Kind() != reflect.Int64 {
			return false
		}
	}
	return true
}

// A Log can only read: each of its methods is one of storage.Reader's (the
// read side storage documents as never writing), none is one of the
// methods *storage.Log has beyond Reader (Append, TruncateTo, DeleteBefore,
// Flush, Close, ...), and none returns anything that has methods of its
// own (but a Section, whose methods return only sizes, flags and errors),
// so no call on a Log leads to a writer.
func TestLogIsReadOnly(t *testing.T) {
	logT := reflect.TypeFor[Log]()
	reader := reflect.TypeFor[storage.Reader]()
	writer := reflect.TypeFor[*storage.Log]()
	for i := range logT.NumMethod() {
		m := logT.Method(i)
		if _, ok := reader.MethodByName(m.Name); !ok {
			t.Errorf("Log.%s is not a method of storage.Reader", m.Name)
		}
		for j := range m.Type.NumOut() {
			out := m.Type.Out(j)
			if out == reflect.TypeFor[error]() {
				continue
			}
			if out == reflect.TypeFor[Section]() {
				sectionLeadsNowhere(t, out)
				continue
			}
			switch out.Kind() {
			case reflect.Bool, reflect.Int32, reflect.Int64:
			case reflect.Slice:
				if !plainData(out.Elem()) {
					t.Errorf("Log.%s returns %s", m.Name, out)
				}
			default:
				t.Errorf("Log.%s returns %s, which could lead past the interface", m.Name, out)
			}
		}
	}
	var writers []string
	for i := range writer.NumMethod() {
		name := writer.Method(i).Name
		if _, ok := reader.MethodByName(name); ok {
			continue
		}
		writers = append(writers, name)
		if _, ok := logT.MethodByName(name); ok {
			t.Errorf("Log has *storage.Log's writer method %s", name)
		}
	}
	for _, must := range []string{"Append", "TruncateTo", "TruncateFullyAndStartAt", "DeleteBefore"} {
		if !strings.Contains(strings.Join(writers, " "), must) {
			t.Errorf("*storage.Log has no %s: the test no longer knows what a writer is (writers: %v)", must, writers)
		}
	}
}

// sectionLeadsNowhere checks that a Section's methods return only sizes,
// flags and errors: a section can be sent and read, and leads to nothing
// that writes the log.
func sectionLeadsNowhere(t *testing.T, sec reflect.Type) {
	for i := range sec.NumMethod() {
		m := sec.Method(i)
		for j := range m.Type.NumOut() {
			switch out := m.Type.Out(j); {
			case out == reflect.TypeFor[error](), out.Kind() == reflect.Int, out.Kind() == reflect.Bool:
			default:
				t.Errorf("Section.%s returns %s, which could lead past the interface", m.Name, out)
			}
		}
	}
}

// No non-test file of the package asserts a value to anything but a kmsg
// request type: an interface assertion on a Log (to one with Append, say)
// is the one way past the Log interface that the layers test's import
// rule cannot see.
func TestNoTypeAssertionsPastLog(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok {
				return true
			}
			if !isKmsgPointer(ta.Type) {
				t.Errorf("%s: type assertion to %s; only *kmsg request types may be asserted", fset.Position(ta.Pos()), typeString(fset, ta.Type))
			}
			return true
		})
	}
}

func isKmsgPointer(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "kmsg"
}

func typeString(fset *token.FileSet, e ast.Expr) string {
	if e == nil {
		return "type (a type switch)"
	}
	var b strings.Builder
	printer.Fprint(&b, fset, e)
	return b.String()
}
