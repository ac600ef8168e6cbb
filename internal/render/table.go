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
	// middle marks truncatable columns cut in the middle, keeping both ends (names whose
	// ends tell them apart, like host-generated owner names).
	middle map[int]bool
	// abbrev says which columns hold identifiers shortened on a terminal unless Wide.
	abbrev map[int]Abbrev
	// optional marks columns left out on a terminal too narrow for the whole table, unless
	// Wide, rightmost first.
	optional map[int]bool
	// states marks columns of lease states, coloured on a terminal (State).
	states map[int]bool
}

// NewTable starts a table with the given column headers (upper-cased when rendered).
func NewTable(ios *IOStreams, headers ...string) *Table {
	return &Table{ios: ios, headers: headers, truncate: map[int]bool{}, middle: map[int]bool{}, abbrev: map[int]Abbrev{}, optional: map[int]bool{}, states: map[int]bool{}}
}

// StateColumn marks column i (0-based) as holding lease states, which a terminal table colours
// (State: owned green, expired yellow). The colour is added after the cell was escaped, so it
// is the only SGR sequence a cell can show.
func (t *Table) StateColumn(i int) *Table {
	t.states[i] = true
	return t
}

// TruncateMiddle marks column i (0-based) as one that may be shortened on a terminal narrower
// than the table by cutting out its middle ("orders-pro…7d9f-x2x4q"): for names that share a
// beginning and differ at the end.
func (t *Table) TruncateMiddle(i int) *Table {
	t.truncate[i], t.middle[i] = true, true
	return t
}

// Abbreviated marks column i (0-based) as holding identifiers of the given kind, which a
// terminal table shortens unambiguously (see Abbrev) unless the streams are Wide. Pipes get
// them whole.
func (t *Table) Abbreviated(i int, kind Abbrev) *Table {
	t.abbrev[i] = kind
	return t
}

// Optional marks column i (0-based) as one a terminal table leaves out when the table is wider
// than the terminal, unless the streams are Wide; optional columns go rightmost first, and
// only as many as needed. Pipes get every column.
func (t *Table) Optional(i int) *Table {
	t.optional[i] = true
	return t
}

// Truncatable marks column i (0-based) as one that may be shortened with "…" on a terminal
// narrower than the table.
func (t *Table) Truncatable(i int) *Table {
	t.truncate[i] = true
	return t
}

// Row adds a row. Missing cells are empty; extra cells are an error at Render.
// Control characters and escape sequences in cells are escaped (Safe), SGR sequences (colours,
// hidden text) included, on a terminal and in a pipe alike: cells are data, and cfp's own
// colours are added by the table (StateColumn).
func (t *Table) Row(cells ...string) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = Safe(c)
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
	if !t.ios.Wide {
		t = t.fitted()
	}
	st := t.ios.Styles()
	headers := make([]any, len(t.headers))
	for i, h := range t.headers {
		headers[i] = st.Header.Render(strings.ToUpper(h))
	}
	var widths tw.Mapper[int, int]
	if !t.ios.Wide {
		widths = t.columnWidths()
	}
	// Middle-cut columns: one cut per column that keeps its distinct values apart (see
	// middleCuts), the column widened when no cut of the planned width does.
	cuts := map[int]map[string]string{}
	for i := range t.middle {
		w, ok := widths.OK(i)
		if !ok {
			continue
		}
		values := make([]string, len(t.rows))
		for j, r := range t.rows {
			values[j] = t.cells(r)[i]
		}
		m, width := middleCuts(values, w-columnGap) // tablewriter counts the padding in the width
		cuts[i] = m
		if width+columnGap > w {
			widths.Set(i, width+columnGap)
		}
	}
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
			if m, ok := cuts[i]; ok {
				c = m[c]
			}
			if t.states[i] {
				c = State(st, c)
			}
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
		out.WriteString(trimRightStyled(strings.TrimRight(line, "\n")))
		out.WriteByte('\n')
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// fitted returns the table as a terminal shows it: identifiers abbreviated, then optional
// columns left out, rightmost first, while the table is wider than the terminal.
func (t *Table) fitted() *Table {
	rows := make([][]string, len(t.rows))
	for i, r := range t.rows {
		rows[i] = t.cells(r)
	}
	for col, kind := range t.abbrev {
		if col >= len(t.headers) {
			continue
		}
		values := make([]string, len(rows))
		for i, r := range rows {
			values[i] = r[col]
		}
		for i, v := range abbreviateColumn(values, kind) {
			rows[i][col] = v
		}
	}
	keep := make([]bool, len(t.headers))
	for i := range keep {
		keep[i] = true
	}
	// Optional columns give way to truncatable ones only down to a readable width.
	natural := naturalWidths(t.headers, rows)
	for i := range t.truncate {
		if i < len(natural) {
			natural[i] = min(natural[i], readableWidth)
		}
	}
	width := func() int {
		n := 0
		for i, w := range natural {
			if keep[i] {
				n += w + columnGap
			}
		}
		return n - columnGap
	}
	for i := len(t.headers) - 1; i >= 0 && t.ios.Width > 0 && width() > t.ios.Width; i-- {
		if t.optional[i] {
			keep[i] = false
		}
	}
	out := &Table{ios: t.ios, truncate: map[int]bool{}, middle: map[int]bool{}, abbrev: map[int]Abbrev{}, optional: map[int]bool{}, states: map[int]bool{}}
	index := make([]int, 0, len(t.headers))
	for i, h := range t.headers {
		if keep[i] {
			if t.truncate[i] {
				out.truncate[len(out.headers)] = true
			}
			if t.middle[i] {
				out.middle[len(out.headers)] = true
			}
			if t.states[i] {
				out.states[len(out.headers)] = true
			}
			out.headers = append(out.headers, h)
			index = append(index, i)
		}
	}
	for _, r := range rows {
		row := make([]string, len(index))
		for j, i := range index {
			row[j] = r[i]
		}
		out.rows = append(out.rows, row)
	}
	return out
}

// trimRightStyled removes the spaces at the end of a line, also those followed only by SGR
// escapes (a styled header's padding), keeping the escapes: a trailing space still takes a
// column and wraps a line as wide as the terminal.
func trimRightStyled(line string) string {
	var tail []string
	for {
		switch {
		case strings.HasSuffix(line, " "):
			line = strings.TrimRight(line, " ")
		case strings.HasSuffix(line, "m"):
			i := strings.LastIndex(line, "\x1b[")
			if i < 0 || strings.Trim(line[i+2:len(line)-1], "0123456789;") != "" {
				return line + strings.Join(tail, "")
			}
			tail = append([]string{line[i:]}, tail...)
			line = line[:i]
		default:
			return line + strings.Join(tail, "")
		}
	}
}

// cutAt shortens s to w columns keeping its first head runes and the last w-1-head.
func cutAt(s string, w, head int) string {
	r := []rune(s)
	if len(r) <= w || w < 3 {
		return s
	}
	return string(r[:head]) + Ellipsis + string(r[len(r)-(w-1-head):])
}

// middleCuts maps each of a column's values to its middle cut at w columns, and returns the
// width it used. Values that differ must not look alike ("cfp-prod…urope-0" for a west and a
// north host): the ellipsis moves from the middle towards either end until every distinct
// value has its own cut, and when no place at w does, w grows until one does (up to the
// widest value, shown whole).
func middleCuts(values []string, w int) (map[string]string, int) {
	distinct := map[string]bool{}
	widest := 0
	for _, v := range values {
		distinct[v] = true
		widest = max(widest, len([]rune(v)))
	}
	for ; w < widest; w++ {
		mid := w - 1 - (w-1)/2
		for d := 0; d < w; d++ {
			heads := []int{mid - d}
			if d > 0 {
				heads = append(heads, mid+d)
			}
			for _, head := range heads {
				if head < 0 || head > w-1 {
					continue
				}
				if m, ok := cutsApart(distinct, w, head); ok {
					return m, w
				}
			}
		}
	}
	m := make(map[string]string, len(distinct))
	for v := range distinct {
		m[v] = v
	}
	return m, widest
}

// cutsApart cuts every value at w keeping head runes, and reports whether no two distinct
// values give the same cut.
func cutsApart(distinct map[string]bool, w, head int) (map[string]string, bool) {
	m := make(map[string]string, len(distinct))
	seen := make(map[string]bool, len(distinct))
	for v := range distinct {
		c := cutAt(v, w, head)
		if seen[c] {
			return nil, false
		}
		seen[c] = true
		m[v] = c
	}
	return m, true
}

// readableWidth is the width down to which a truncatable column is cut before optional columns
// are left out.
const readableWidth = 16

// columnGap is the space between two columns of a terminal table.
const columnGap = 2

// naturalWidths are the widths of each column's widest cell or header.
func naturalWidths(headers []string, rows [][]string) []int {
	natural := make([]int, len(headers))
	for i, h := range headers {
		natural[i] = lipgloss.Width(h)
	}
	for _, r := range rows {
		for i, c := range r {
			if i < len(natural) {
				natural[i] = max(natural[i], lipgloss.Width(c))
			}
		}
	}
	return natural
}

// columnWidths returns maximum widths for truncatable columns so the table fits the terminal:
// the space left after the fixed columns is shared among them.
func (t *Table) columnWidths() tw.Mapper[int, int] {
	if len(t.truncate) == 0 || t.ios.Width <= 0 {
		return nil
	}
	const gap = columnGap
	rows := make([][]string, len(t.rows))
	for i, r := range t.rows {
		rows[i] = t.cells(r)
	}
	natural := naturalWidths(t.headers, rows)
	total, fixed := 0, 0
	for i, n := range natural {
		total += n + gap
		if !t.truncate[i] {
			fixed += n + gap
		}
	}
	if total-gap <= t.ios.Width {
		return nil
	}
	// A line is the cells plus a gap between each two; tablewriter's maximum width of a
	// column counts its padding (the gap) too.
	content := (t.ios.Width+gap-fixed)/len(t.truncate) - gap
	m := tw.NewMapper[int, int]()
	for i := range t.truncate {
		m.Set(i, max(content, 8)+gap)
	}
	return m
}
