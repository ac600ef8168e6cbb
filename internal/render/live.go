package render

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	_ "github.com/cfp-dev/cfp/internal/render/termbg" // runs before Bubble Tea's init: see termbg
)

// LiveSort is a sort order of a live view, chosen with its key.
type LiveSort struct {
	// Key is the key that chooses the order ("l").
	Key string
	// Name names the order in the footer ("lag").
	Name string
}

// LiveFrame draws one frame of a live view for a terminal of width x height cells, its rows
// sorted by the named order. Lines wider than width are cut and lines beyond height left out,
// so a frame never wraps or scrolls; a frame that fits needs no care.
type LiveFrame func(width, height int, sort string) string

// LiveQuit says how the user ended a live view.
type LiveQuit int

const (
	// LiveQuitKey: the user pressed q (or Esc).
	LiveQuitKey LiveQuit = iota + 1
	// LiveQuitInterrupt: the user pressed Ctrl-C, which in a live view is a key, not a signal.
	LiveQuitInterrupt
)

// Live is a live view that owns the terminal: the alternate screen, redrawn whole on every
// Refresh and on every resize at the terminal's new size, so nothing of an earlier frame is
// left behind whatever the width. q or Esc quits, Ctrl-C interrupts, the sort keys reorder.
// Off a terminal there is no live view: commands print plain snapshots instead.
type Live struct {
	prog *tea.Program
	quit chan LiveQuit
	done chan struct{}
	err  error

	stopOnce sync.Once
}

// StartLive takes over the terminal of ios and shows frame until Stop. sorts are the orders
// the user can choose, the first being the default. The quit channel (Quit) tells when the
// user ended the view; the caller then stops what it shows and calls Stop.
func StartLive(ios *IOStreams, frame LiveFrame, sorts ...LiveSort) *Live {
	l := &Live{quit: make(chan LiveQuit, 1), done: make(chan struct{})}
	m := &liveModel{frame: frame, sorts: sorts, width: ios.Width, height: 24, quit: l.quit}
	l.prog = tea.NewProgram(m,
		tea.WithAltScreen(),
		tea.WithInput(ios.In),
		tea.WithOutput(ios.Out),
		// cfp's own signal handling ends the command, which stops the view.
		tea.WithoutSignalHandler(),
		tea.WithoutCatchPanics(),
	)
	go func() {
		defer close(l.done)
		_, err := l.prog.Run()
		if errors.Is(err, tea.ErrProgramKilled) {
			err = nil
		}
		l.err = err
	}()
	return l
}

// Refresh redraws the view from frame (the data changed). It never blocks.
func (l *Live) Refresh() {
	select {
	case <-l.done:
	default:
		go l.prog.Send(refreshMsg{})
	}
}

// Quit delivers how the user ended the view, once.
func (l *Live) Quit() <-chan LiveQuit { return l.quit }

// Stop ends the view, gives the terminal back as it was (the main screen, the cursor, cooked
// input) and returns when it did, at most after a second.
func (l *Live) Stop() error {
	l.stopOnce.Do(func() { l.prog.Quit() })
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		l.prog.Kill()
		<-l.done
	}
	return l.err
}

// Wait returns when the view ended or ctx did.
func (l *Live) Wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-l.done:
	}
}

type refreshMsg struct{}

type liveModel struct {
	frame         LiveFrame
	sorts         []LiveSort
	sort          int
	width, height int
	quit          chan LiveQuit
	quitting      bool
}

func (m *liveModel) Init() tea.Cmd { return nil }

func (m *liveModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		// A resize may leave the terminal's own reflow of the old frame: draw on a clean screen.
		return m, tea.ClearScreen
	case tea.KeyMsg:
		switch s := msg.String(); s {
		case "q", "esc":
			return m.end(LiveQuitKey)
		case "ctrl+c":
			return m.end(LiveQuitInterrupt)
		case "s", "tab":
			if len(m.sorts) > 0 {
				m.sort = (m.sort + 1) % len(m.sorts)
			}
		default:
			for i, o := range m.sorts {
				if s == o.Key {
					m.sort = i
				}
			}
		}
	}
	return m, nil
}

// end tells the caller the user ended the view; the caller stops it.
func (m *liveModel) end(q LiveQuit) (tea.Model, tea.Cmd) {
	if !m.quitting {
		m.quitting = true
		m.quit <- q
	}
	return m, nil
}

func (m *liveModel) View() string {
	sort := ""
	if len(m.sorts) > 0 {
		sort = m.sorts[m.sort].Name
	}
	body := FitFrame(m.frame(m.width, m.height-1, sort), m.width, m.height-1)
	// The footer stays on the last line.
	if pad := m.height - 1 - strings.Count(body, "\n") - 1; pad > 0 {
		body += strings.Repeat("\n", pad)
	}
	return body + "\n" + ansi.Truncate(m.footer(), m.width, "")
}

// footer is the last line: the sort orders, the current one marked, and how to quit.
func (m *liveModel) footer() string {
	var b strings.Builder
	if len(m.sorts) > 0 {
		b.WriteString("sort:")
		for i, o := range m.sorts {
			mark := " "
			if i == m.sort {
				mark = "*"
			}
			b.WriteString(" " + mark + "[" + o.Key + "]" + o.Name)
		}
		b.WriteString("  ")
	}
	b.WriteString("q quit  Ctrl-C interrupt")
	return b.String()
}

// FitFrame cuts each line of frame to width cells (escape sequences kept) and keeps at most
// height lines, the last of them saying how many were left out: a frame drawn with it never
// wraps or scrolls the terminal.
func FitFrame(frame string, width, height int) string {
	lines := strings.Split(strings.TrimRight(frame, "\n"), "\n")
	if height > 0 && len(lines) > height {
		more := len(lines) - height + 1
		lines = append(lines[:height-1], "… "+strconv.Itoa(more)+" more lines")
	}
	for i, line := range lines {
		if width > 0 && ansi.StringWidth(line) > width {
			lines[i] = ansi.Truncate(line, width, "…")
		}
	}
	return strings.Join(lines, "\n")
}
