package cmd

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/buildinfo"
	"github.com/cfp-dev/cfp/internal/render"
)

type versionOptions struct {
	printer func(render.Format) (*render.Printer, error)
	io      *render.IOStreams
}

// versionView is the JSON of `cfp version -o json`; a public contract (docs/scripting.md).
type versionView struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func newVersionCmd(f *factory) *cobra.Command {
	opts := &versionOptions{printer: f.printer, io: f.IO}
	return &cobra.Command{
		Use:   "version",
		Short: "Print cfp's version",
		Long:  "Print cfp's version, commit, build date, Go version and platform.",
		Example: `  cfp version
  cfp version -o json | jq -r .version`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runVersion(c.Context(), opts)
		},
	}
}

func runVersion(ctx context.Context, opts *versionOptions) error {
	version, commit, date := buildinfo.Info()
	v := versionView{
		Version:   version,
		Commit:    commit,
		Date:      date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	// Text by default, also in a pipe: `cfp version | head -1` is for humans; -o json is for scripts.
	p, err := opts.printer(render.FormatTable)
	if err != nil {
		return err
	}
	if p.Format == render.FormatTable {
		_, err := fmt.Fprintf(opts.io.Out, "cfp %s\ngo %s %s\n", versionString(version, commit, date), v.GoVersion, v.Platform)
		return err
	}
	return p.Print(ctx, v, nil)
}
