package cmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/internal/emulator"
)

type emulatorCertOptions struct {
	f    *factory
	Data string
	Path bool
}

const emulatorCertLong = `Print the TLS certificate of the emulator's data directory (PEM), generating it if the
directory has none yet, so that clients can trust https://localhost:8081/.

The certificate is self-signed for localhost, 127.0.0.1 and ::1 and kept in DIR/emulator.pem;
'cfp emulator' serves TLS with it on its port (beside plain HTTP) and at
/_explorer/emulator.pem, as the official emulator does. It works beside a running emulator.`

const emulatorCertExample = `  # Trust the emulator's certificate in a Go or Node.js test run (Linux)
  export SSL_CERT_FILE=$(cfp emulator cert --path)
  export NODE_EXTRA_CA_CERTS=$(cfp emulator cert --path)

  # Connect cfp itself over TLS
  cfp tail -d shop -c orders --endpoint https://localhost:8081/ --ca-file "$(cfp emulator cert --path)"`

func newEmulatorCertCmd(f *factory) *cobra.Command {
	opts := &emulatorCertOptions{f: f}
	c := &cobra.Command{
		Use:     "cert [flags]",
		Short:   "Print the emulator's TLS certificate (or its path) for clients to trust",
		Long:    emulatorCertLong,
		Example: emulatorCertExample,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Data == "" {
				return usageErrorf("--data must name a directory")
			}
			return runEmulatorCert(opts)
		},
	}
	c.Flags().StringVar(&opts.Data, "data", defaultLocalDir, "data `DIR` of the emulator")
	c.Flags().BoolVar(&opts.Path, "path", false, "print the certificate file's path instead of the PEM")
	return c
}

func runEmulatorCert(opts *emulatorCertOptions) error {
	dir, err := filepath.Abs(opts.Data)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", opts.Data, err)
	}
	if _, err := emulator.LoadOrCreateCert(dir); err != nil {
		return err
	}
	path := emulator.CertPath(dir)
	if opts.Path {
		_, err := fmt.Fprintln(opts.f.IO.Out, path)
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read emulator certificate: %w", err)
	}
	_, err = opts.f.IO.Out.Write(b)
	return err
}
