package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Empty is what a table shows for a cell with no value.
const Empty = "-"

// Table collects rows and renders them for eyes or for pipes: on a terminal an aligned table
// with upper-case (and, with colour, bold) headers, fitted to the terminal width; in a pipe
// tab-separated values with one header line. Empty cells show as "-".
type Table struct {
	ios     *IOStreams
	headers []string
	rows    [][]string
	// truncate marks columns that may be cut to fit the terminal width (wide free text,
	// continuations); other columns are never cut.
	truncate map[int]bool
}

// NewTable starts a table with the given column headers (upper-cased when rendered).
func NewTable(ios *IOStreams, headers ...string) *Table {
	return &Table{ios: ios, headers: headers, truncate: map[int]bool{}}
}

// Truncatable marks column i (0-based) as one that may be shortened with "…" on a terminal
// narrower than the table.
func (t *Table) Truncatable(i int) *Table {
	t.truncate[i] = true
	return t
}

// Row adds a row. Missing cells are empty; extra cells are an error at Render.
// Control characters in cells are escaped (Safe, keeping cfp's own colours).
func (t *Table) Row(cells ...string) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = safeStyled(c)
	}
	t.rows = append(t.rows, row)
}

// Len returns the number of rows added.
func (t *Table) Len() int { return len(t.rows) }

// Render writes the table to the streams' stdout.
func (t *Table) Render() error {
	return t.RenderTo(t.ios.Out)
}

// RenderTo writes the table to w, styled for the streams' stdout.
func (t *Table) RenderTo(w io.Writer) error {
	for i, r := range t.rows {
		if len(r) > len(t.headers) {
			return fmt.Errorf("table row %d has %d cells for %d columns", i, len(r), len(t.headers))
		}
	}
	if !t.ios.IsStdoutTTY {
		return t.renderTSV(w)
	}
	return t.renderTTY(w)
}

func (t *Table) cells(r []string) []string {
	out := make([]string, len(t.headers))
	for i := range out {
		if i < len(r) && strings.TrimSpace(r[i]) != "" {
			out[i] = r[i]
		} else {
			out[i] = Empty
		}
	}
	return out
}

func (t *Table) renderTSV(w io.Writer) error {
	var b strings.Builder
	clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
	line := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				b.WriteByte('\t')
			}
			b.WriteString(clean.Replace(c))
		}
		b.WriteByte('\n')
	}
	hs := make([]string, len(t.headers))
	for i, h := range t.headers {
		hs[i] = strings.ToUpper(h)
	}
	line(hs)
	for _, r := range t.rows {
		line(t.cells(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (t *Table) renderTTY(w io.Writer) error {
	st := t.ios.Styles()
	headers := make([]any, len(t.headers))
	for i, h := range t.headers {
		headers[i] = st.Header.Render(strings.ToUpper(h))
	}
	widths := t.columnWidths()
	var buf strings.Builder
	tbl := tablewriter.NewTable(&buf,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders: tw.BorderNone,
			Symbols: tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{
				Separators: tw.Separators{ShowHeader: tw.Off, ShowFooter: tw.Off, BetweenRows: tw.Off, BetweenColumns: tw.Off},
				Lines:      tw.Lines{ShowTop: tw.Off, ShowBottom: tw.Off, ShowHeaderLine: tw.Off, ShowFooterLine: tw.Off},
			},
		})),
		tablewriter.WithConfig(tablewriter.Config{
			Header: tw.CellConfig{
				Formatting: tw.CellFormatting{AutoFormat: tw.Off, AutoWrap: tw.WrapNone},
				Alignment:  tw.CellAlignment{Global: tw.AlignLeft},
				Padding:    tw.CellPadding{Global: tw.Padding{Left: "", Right: "  ", Overwrite: true}},
			},
			Row: tw.CellConfig{
				Formatting:   tw.CellFormatting{AutoWrap: tw.WrapTruncate},
				Alignment:    tw.CellAlignment{Global: tw.AlignLeft},
				Padding:      tw.CellPadding{Global: tw.Padding{Left: "", Right: "  ", Overwrite: true}},
				ColMaxWidths: tw.CellWidth{PerColumn: widths},
			},
			Behavior: tw.Behavior{TrimSpace: tw.On},
		}),
	)
	tbl.Header(headers...)
	for _, r := range t.rows {
		cells := t.cells(r)
		row := make([]any, len(cells))
		for i, c := range cells {
			row[i] = c
		}
		if err := tbl.Append(row...); err != nil {
			return fmt.Errorf("render table: %w", err)
		}
	}
	if err := tbl.Render(); err != nil {
		return fmt.Errorf("render table: %w", err)
	}
	// Cells are padded on the right; a line never ends in spaces.
	var out strings.Builder
	for line := range strings.Lines(buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n"))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// columnWidths returns maximum widths for truncatable columns so the table fits the terminal:
// the space left after the fixed columns is shared among them.
func (t *Table) columnWidths() tw.Mapper[int, int] {
	if len(t.truncate) == 0 || t.ios.Width <= 0 {
		return nil
	}
	const gap = 2
	natural := make([]int, len(t.headers))
	for i, h := range t.headers {
		natural[i] = lipgloss.Width(h)
	}
	for _, r := range t.rows {
		for i, c := range t.cells(r) {
			natural[i] = max(natural[i], lipgloss.Width(c))
		}
	}
	total, fixed := 0, 0
	for i, n := range natural {
		total += n + gap
		if !t.truncate[i] {
			fixed += n + gap
		}
	}
	if total <= t.ios.Width {
		return nil
	}
	share := (t.ios.Width - fixed) / len(t.truncate)
	m := tw.NewMapper[int, int]()
	for i := range t.truncate {
		m.Set(i, max(share-gap, 8))
	}
	return m
}
