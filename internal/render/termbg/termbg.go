// Package termbg keeps cfp from asking the terminal for its background colour.
//
// Bubble Tea v1 (the live views) asks, in its init, through Lip Gloss's default renderer: it
// writes an OSC 11 query and a cursor position request to a terminal stdout and waits for the
// answers, up to termenv's 5s timeout on a terminal that gives none (script, a CI
// pseudo-terminal, docker run -t), on every cfp command, and the query lands in captured
// output. cfp's styles use fixed ANSI colours, so the answer is never needed: this package
// sets it before Bubble Tea's init runs. Go initializes, among the packages whose imports are
// initialized, the one with the smallest import path first, and
// github.com/cfp-dev/cfp/internal/render/termbg sorts before github.com/charmbracelet/bubbletea;
// both depend on lipgloss only, so this init runs first. Import it (blank) wherever Bubble Tea
// is imported.
package termbg

import "github.com/charmbracelet/lipgloss"

func init() {
	// Dark or light makes no difference to cfp's output: it uses no adaptive colours.
	lipgloss.SetHasDarkBackground(true)
}
