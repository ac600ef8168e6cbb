package cmd

import (
	"fmt"
	"log/slog"

	"github.com/cfp-dev/cfp/internal/render"
)

// outputFormat resolves -o for a command whose default off a terminal is pipe (usually
// render.FormatJSON or render.FormatJSONL). --jq implies JSON output (pipe, or FormatJSON when
// pipe is a table) and refuses -o table.
func (f *factory) outputFormat(pipe render.Format) (render.Format, error) {
	fmtv, err := render.ParseFormat(f.Global.Output)
	if err != nil {
		return "", usageErrorf("%w", err)
	}
	if f.Global.JQ != "" {
		switch fmtv {
		case render.FormatTable:
			return "", usageErrorf("--jq filters JSON output: drop -o table or --jq")
		case render.FormatAuto:
			if pipe == render.FormatTable {
				return render.FormatJSON, nil
			}
			return pipe, nil
		}
	}
	return fmtv.Resolve(f.IO.IsStdoutTTY, pipe), nil
}

// jqQuery returns the compiled --jq expression (nil without --jq), compiled once.
func (f *factory) jqQuery() (*render.Query, error) {
	f.queryOnce.Do(func() {
		if f.Global.JQ == "" {
			return
		}
		f.query, f.queryErr = render.CompileQuery(f.Global.JQ)
		if f.queryErr != nil {
			f.queryErr = &UsageError{Err: f.queryErr, Brief: true}
		}
	})
	return f.query, f.queryErr
}

// printer returns a printer for this run's -o and --jq, with pipe as the default format off a
// terminal.
func (f *factory) printer(pipe render.Format) (*render.Printer, error) {
	format, err := f.outputFormat(pipe)
	if err != nil {
		return nil, err
	}
	q, err := f.jqQuery()
	if err != nil {
		return nil, err
	}
	return render.NewPrinter(f.IO, format, q), nil
}

// warnf writes a warning line to stderr: "cfp: warning: ...".
func (f *factory) warnf(format string, args ...any) {
	msg := f.redact(fmt.Sprintf(format, args...))
	fmt.Fprintf(f.IO.ErrOut, "cfp: warning: %s\n", f.IO.StderrStyles().Warning.Render(render.Safe(oneLine(msg))))
}

// newLogger builds the run's logger on stderr from --log-level and --log-format. Attribute
// values that contain a secret are masked.
func (f *factory) newLogger() *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.Global.LogLevel)); err != nil {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindString {
				if s := a.Value.String(); s != "" {
					if r := f.redact(s); r != s {
						a.Value = slog.StringValue(r)
					}
				}
			}
			return a
		},
	}
	if f.Global.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(f.IO.ErrOut, opts))
	}
	return slog.New(slog.NewTextHandler(f.IO.ErrOut, opts))
}
