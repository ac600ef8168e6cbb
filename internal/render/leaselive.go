package render

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	tea "github.com/charmbracelet/bubbletea"
)

// LeaseLiveOptions shape a live lease view.
type LeaseLiveOptions struct {
	// In gives the keys and Out shows the view: a terminal's input and output (stdout's
	// terminal, or stderr's when stdout is redirected).
	In  io.Reader
	Out io.Writer
	// Width is the terminal's width until the first resize message.
	Width int
	// Styles colour the view.
	Styles Styles
	// Sorts are the orders the sort keys choose, the first the default.
	Sorts []LiveSort
	// Detail reads one lease whole (as cfp leases show), when the user opens it and again at
	// each Set while it stays open.
	Detail func(ctx context.Context, token string) (*LeaseShow, error)
}

// LeaseLive is the live lease view shared by `cfp estimate --watch` and `cfp process` on a
// terminal (LeaseViewModel): it owns the terminal (the alternate screen) until Stop, redraws
// at every Set and resize, and reads one lease whole when the user opens it.
type LeaseLive struct {
	prog *tea.Program
	quit chan LiveQuit
	done chan struct{}
	err  error
	// cancel ends the reads of opened leases still under way when the view stops.
	cancel context.CancelFunc

	stopOnce sync.Once
}

// StartLeaseLive takes over the terminal and shows the view until Stop; ctx bounds the reads
// of opened leases.
func StartLeaseLive(ctx context.Context, o LeaseLiveOptions) *LeaseLive {
	ctx, cancel := context.WithCancel(ctx)
	l := &LeaseLive{quit: make(chan LiveQuit, 1), done: make(chan struct{}), cancel: cancel}
	st := o.Styles
	m := &leaseLiveModel{
		ctx: ctx, detail: o.Detail, width: o.Width, height: 24, quit: l.quit,
		m: LeaseViewModel{Sorts: o.Sorts, Styles: &st},
	}
	l.prog = tea.NewProgram(m,
		tea.WithAltScreen(),
		tea.WithInput(o.In),
		tea.WithOutput(o.Out),
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

// Set shows new data. It never blocks.
func (l *LeaseLive) Set(d LeaseViewData) {
	select {
	case <-l.done:
	default:
		go l.prog.Send(leaseDataMsg{d})
	}
}

// Quit delivers how the user ended the view, once.
func (l *LeaseLive) Quit() <-chan LiveQuit {
	if l == nil {
		return nil
	}
	return l.quit
}

// Stop ends the view, gives the terminal back as it was and returns when it did, at most after
// a second.
func (l *LeaseLive) Stop() error {
	l.stopOnce.Do(func() {
		l.cancel()
		l.prog.Quit()
	})
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

type leaseDataMsg struct{ d LeaseViewData }

type leaseDetailMsg struct {
	token string
	d     *LeaseShow
	err   error
}

type leaseLiveModel struct {
	ctx           context.Context
	detail        func(ctx context.Context, token string) (*LeaseShow, error)
	m             LeaseViewModel
	width, height int
	loading       bool
	quit          chan LiveQuit
	quitting      bool
}

func (m *leaseLiveModel) Init() tea.Cmd { return nil }

func (m *leaseLiveModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		// A resize may leave the terminal's own reflow of the old frame: draw on a clean screen.
		return m, tea.ClearScreen
	case leaseDataMsg:
		m.m.Data = msg.d
		if m.m.Open != "" {
			return m, m.load()
		}
	case leaseDetailMsg:
		m.loading = false
		m.m = m.m.SetDetail(msg.token, msg.d, msg.err)
	case tea.KeyMsg:
		keys := []string{msg.String()}
		if msg.Type == tea.KeyRunes && !msg.Paste && len(msg.Runes) > 1 {
			keys = keys[:0]
			for _, r := range msg.Runes {
				keys = append(keys, string(r))
			}
		}
		var cmds []tea.Cmd
		for _, k := range keys {
			var act LeaseViewAction
			m.m, act = m.m.Key(k)
			switch act {
			case LeaseViewQuit:
				m.end(LiveQuitKey)
			case LeaseViewInterrupt:
				m.end(LiveQuitInterrupt)
			case LeaseViewLoad:
				m.loading = false
				cmds = append(cmds, m.load())
			}
		}
		return m, tea.Batch(cmds...)
	}
	return m, nil
}

// load reads the opened lease in the background, one read at a time.
func (m *leaseLiveModel) load() tea.Cmd {
	if m.detail == nil || m.loading {
		return nil
	}
	m.loading = true
	token, ctx, read := m.m.Open, m.ctx, m.detail
	return func() tea.Msg {
		d, err := read(ctx, token)
		return leaseDetailMsg{token: token, d: d, err: err}
	}
}

// end tells the caller the user ended the view; the caller stops it.
func (m *leaseLiveModel) end(q LiveQuit) {
	if !m.quitting {
		m.quitting = true
		m.quit <- q
	}
}

func (m *leaseLiveModel) View() string {
	return m.m.Render(m.width, m.height)
}
