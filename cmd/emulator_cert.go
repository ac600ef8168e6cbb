package cmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cfp-dev/cfp/emulator"
)

type emulatorCertOptions struct {
	f    *factory
	Data string
	Path bool
}

const emulatorCertLong = `Print the TLS certificate of the emulator's data directory (PEM), generating it if the
directory has none yet, so that clients can trust https://localhost:8081/.

DIR/emulator.pem is a CA certificate that can only vouch for localhost, 127.0.0.1 and ::1
(x509 name constraints), and whose private key was discarded once it had signed the certificate
'cfp emulator' serves: reading the data directory lets nobody make clients trust anything else.
'cfp emulator' serves TLS on its port (beside plain HTTP) and the CA at /_explorer/emulator.pem,
as the official emulator does. It works beside a running emulator. A data directory of an older
cfp, whose emulator.pem was an unconstrained CA with its key beside it, gets a new certificate
(with a warning): trust the new file.`

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
	_, replaced, err := emulator.LoadOrCreateCert(dir)
	if err != nil {
		return err
	}
	if replaced {
		opts.f.warnf("replaced the TLS certificate of %s, an unconstrained CA of an older cfp, by one constrained to loopback names: trust the new %s (and remove the old one from your trust stores); restart a running emulator to serve it", dir, emulator.CertFileName)
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
