package render

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles are the few text styles cfp uses. With colour off they render text unchanged.
type Styles struct {
	Header  lipgloss.Style
	Bold    lipgloss.Style
	Muted   lipgloss.Style
	Success lipgloss.Style
	Warning lipgloss.Style
	Error   lipgloss.Style
	// Selected marks the selected row of a live view (reverse video).
	Selected lipgloss.Style
}

// Styles returns the styles for stdout, honouring ColorEnabled.
func (s *IOStreams) Styles() Styles { return newStyles(s.ColorEnabled) }

// StderrStyles returns the styles for stderr, honouring StderrColorEnabled.
func (s *IOStreams) StderrStyles() Styles { return newStyles(s.StderrColorEnabled) }

func newStyles(color bool) Styles {
	r := lipgloss.NewRenderer(io.Discard)
	if color {
		r.SetColorProfile(termenv.ANSI)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	return Styles{
		Header:   r.NewStyle().Bold(true),
		Bold:     r.NewStyle().Bold(true),
		Muted:    r.NewStyle().Faint(true),
		Success:  r.NewStyle().Foreground(lipgloss.ANSIColor(2)),
		Warning:  r.NewStyle().Foreground(lipgloss.ANSIColor(3)),
		Error:    r.NewStyle().Foreground(lipgloss.ANSIColor(1)),
		Selected: r.NewStyle().Reverse(true),
	}
}
