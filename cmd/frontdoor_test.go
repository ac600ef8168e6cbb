package cmd

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// frontDoorFiles are the files of the commands that run the processor host (cfp process, its
// live view) and the estimator (cfp estimate): they reach the engine only through the public
// changefeed package (and changefeed/prom), so every host and estimation feature they use is
// one a Go program can use too. A feature the package lacks is added to it, not reached for in
// internal/feed.
var frontDoorFiles = []string{"process*.go", "delegate.go", "estimate*.go"}

// TestFrontDoor fails when a file of frontDoorFiles imports the engine (internal/feed)
// itself.
func TestFrontDoor(t *testing.T) {
	t.Parallel()
	var files []string
	for _, pat := range frontDoorFiles {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		n++
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "github.com/cfp-dev/cfp/internal/feed" || strings.HasPrefix(path, "github.com/cfp-dev/cfp/internal/feed/") {
				t.Errorf("%s imports %s: reach the engine through github.com/cfp-dev/cfp/changefeed (make the feature public there)", name, path)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d files match %v: the list is stale", n, frontDoorFiles)
	}
}
