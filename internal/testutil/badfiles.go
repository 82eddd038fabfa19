package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BadFiles checks that every file pattern matches (at least min of them:
// a moved testdata directory must not pass by matching nothing) is refused
// by parse with the one-line error its first line announces: "# want: "
// and the exact error, or "# want-prefix: " and its start. parse gets the
// file's base name and its bytes.
func BadFiles(t *testing.T, pattern string, min int, parse func(name string, data []byte) error) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) < min {
		t.Fatalf("%s matches %d files, want at least %d (%v)", pattern, len(files), min, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(data), "\n")
			exact := true
			want, ok := strings.CutPrefix(first, "# want: ")
			if !ok {
				exact = false
				if want, ok = strings.CutPrefix(first, "# want-prefix: "); !ok {
					t.Fatalf("first line %q does not say what error to expect (# want: or # want-prefix:)", first)
				}
			}
			err = parse(filepath.Base(f), data)
			if err == nil {
				t.Fatalf("accepted; want %q", want)
			}
			got := err.Error()
			if strings.Contains(got, "\n") {
				t.Errorf("error spans lines: %q", got)
			}
			if exact && got != want || !exact && !strings.HasPrefix(got, want) {
				t.Errorf("error\n got %q\nwant %q", got, want)
			}
		})
	}
}
