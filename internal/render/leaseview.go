package render

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// LeaseViewData is what the live lease view of `cfp estimate --watch` and `cfp process` shows
// at one moment: the latest estimate and the lines around it.
type LeaseViewData struct {
	// Title is the first line ("cfp estimate  shop/orders  processor proj  15:04:05  every 5s").
	Title string
	// Estimate is the latest estimate; nil until the first one.
	Estimate *EstimateView
	// Trends are the recent lags of each lease, oldest first (the TREND column); nil: none.
	Trends map[string][]int64
	// Host is a line about this host (cfp process: its leases and the changes it counted).
	Host string
	// Status is the last failure or threshold message, "" when none.
	Status string
}

// LeaseViewAction is what the caller of LeaseViewModel.Key has to do after a key.
type LeaseViewAction int

const (
	// LeaseViewNone: nothing; redraw.
	LeaseViewNone LeaseViewAction = iota
	// LeaseViewQuit: the user pressed q.
	LeaseViewQuit
	// LeaseViewInterrupt: the user pressed Ctrl-C, which in a live view is a key, not a signal.
	LeaseViewInterrupt
	// LeaseViewLoad: a lease was opened (Open names it); read it whole (SetDetail).
	LeaseViewLoad
)

// LeaseViewModel is the state of the live lease view, k9s-like: a table of leases with their
// verdicts, a selection, a filter, a help screen, and one lease opened whole. Key and Render are
// pure functions of the model: the Bubble Tea program (StartLeaseLive) only feeds them.
type LeaseViewModel struct {
	Data LeaseViewData
	// Sorts are the orders the sort keys choose, the first the default; Sort is the current.
	Sorts []LiveSort
	Sort  int
	// Filter keeps the leases that each of its words matches (case-insensitive): a word
	// matches a lease whose token starts with it, or whose owner or verdict contains it; Filtering says the user is typing it (after /).
	Filter    string
	Filtering bool
	// Help shows the keys instead of the table.
	Help bool
	// Selected is the token of the selected lease ("" : the first shown).
	Selected string
	// Open is the token of the lease shown whole, "" when the table is shown; Detail is what
	// was read of it (nil while loading), DetailErr why that failed.
	Open      string
	Detail    *LeaseShow
	DetailErr string
	// Styles colour the view (the selection in reverse); the zero value draws plain text.
	Styles *Styles
}

// Key applies one key (as Bubble Tea names it: "q", "esc", "enter", "up", "ctrl+c", "a") and
// says what the caller must do.
func (m LeaseViewModel) Key(k string) (LeaseViewModel, LeaseViewAction) {
	if k == "ctrl+c" {
		return m, LeaseViewInterrupt
	}
	switch {
	case m.Help:
		switch k {
		case "q":
			return m, LeaseViewQuit
		case "?", "esc", "enter", "backspace":
			m.Help = false
		}
		return m, LeaseViewNone
	case m.Filtering:
		switch k {
		case "esc":
			m.Filter, m.Filtering = "", false
		case "enter":
			m.Filtering = false
		case "backspace":
			if r := []rune(m.Filter); len(r) > 0 {
				m.Filter = string(r[:len(r)-1])
			}
		case "up", "down":
			return m.move(k), LeaseViewNone
		case "space":
			m.Filter += " "
		default:
			if r := []rune(k); len(r) == 1 && r[0] >= ' ' {
				m.Filter += k
			}
		}
		return m.keepSelection(), LeaseViewNone
	case m.Open != "":
		switch k {
		case "q":
			return m, LeaseViewQuit
		case "esc", "backspace", "left", "h":
			m.Open, m.Detail, m.DetailErr = "", nil, ""
		case "?":
			m.Help = true
		}
		return m, LeaseViewNone
	}
	switch k {
	case "q":
		return m, LeaseViewQuit
	case "?":
		m.Help = true
	case "/":
		m.Filtering = true
	case "esc":
		m.Filter = ""
		return m.keepSelection(), LeaseViewNone
	case "up", "k", "down", "j", "home", "g", "end", "G", "pgup", "pgdown":
		return m.move(k), LeaseViewNone
	case "enter", "right":
		rows := m.Rows()
		if len(rows) == 0 {
			return m, LeaseViewNone
		}
		m.Open, m.Detail, m.DetailErr = rows[m.selectedIndex(rows)].Lease, nil, ""
		return m, LeaseViewLoad
	case "s", "tab":
		if len(m.Sorts) > 0 {
			m.Sort = (m.Sort + 1) % len(m.Sorts)
		}
	default:
		for i, o := range m.Sorts {
			if k == o.Key {
				m.Sort = i
			}
		}
	}
	return m, LeaseViewNone
}

// SetDetail shows what was read of the opened lease token (ignored when another is open now).
func (m LeaseViewModel) SetDetail(token string, d *LeaseShow, err error) LeaseViewModel {
	if token != m.Open {
		return m
	}
	if err != nil {
		m.DetailErr = err.Error()
		return m
	}
	m.Detail, m.DetailErr = d, ""
	return m
}

// SortName is the name of the current order ("" without sorts).
func (m LeaseViewModel) SortName() string {
	if len(m.Sorts) == 0 {
		return ""
	}
	return m.Sorts[min(m.Sort, len(m.Sorts)-1)].Name
}

// Rows are the leases the table shows: filtered, in the current order.
func (m LeaseViewModel) Rows() []EstimateLease {
	if m.Data.Estimate == nil {
		return nil
	}
	words := strings.Fields(strings.ToLower(m.Filter))
	var out []EstimateLease
	for _, l := range SortEstimateLeases(m.Data.Estimate.Leases, m.SortName()) {
		if matchesFilter(l, words) {
			out = append(out, l)
		}
	}
	return out
}

// matchesFilter: every word starts the lease's token, or is in its owner or its verdict.
func matchesFilter(l EstimateLease, words []string) bool {
	token := strings.ToLower(l.Lease)
	hay := strings.ToLower(orZero(l.Owner) + " " + cmp.Or(l.Verdict, l.Progress))
	for _, w := range words {
		if !strings.HasPrefix(token, w) && !strings.Contains(hay, w) {
			return false
		}
	}
	return true
}

func (m LeaseViewModel) selectedIndex(rows []EstimateLease) int {
	if i := slices.IndexFunc(rows, func(l EstimateLease) bool { return l.Lease == m.Selected }); i >= 0 {
		return i
	}
	return 0
}

// keepSelection moves the selection to the first row when the selected lease is filtered out.
func (m LeaseViewModel) keepSelection() LeaseViewModel {
	rows := m.Rows()
	if len(rows) > 0 && !slices.ContainsFunc(rows, func(l EstimateLease) bool { return l.Lease == m.Selected }) {
		m.Selected = rows[0].Lease
	}
	return m
}

// move moves the selection by a key.
func (m LeaseViewModel) move(k string) LeaseViewModel {
	rows := m.Rows()
	if len(rows) == 0 {
		return m
	}
	i := m.selectedIndex(rows)
	switch k {
	case "up", "k":
		i--
	case "down", "j":
		i++
	case "pgup":
		i -= 10
	case "pgdown":
		i += 10
	case "home", "g":
		i = 0
	case "end", "G":
		i = len(rows) - 1
	}
	m.Selected = rows[min(max(i, 0), len(rows)-1)].Lease
	return m
}

// leaseViewKeys are the lines of the help screen.
var leaseViewKeys = [][2]string{
	{"↑ ↓  k j", "select a lease (g G: first, last)"},
	{"enter", "open the selected lease whole (as cfp leases show)"},
	{"esc", "back from an opened lease; clear the filter"},
	{"/", "filter by lease, owner or verdict (enter keeps it, esc clears)"},
	{"s  tab", "next sort order"},
	{"?", "this help (esc or ? closes it)"},
	{"q", "quit"},
	{"ctrl+c", "interrupt"},
}

// Render draws the view at width x height cells: never a line wider, never more lines.
func (m LeaseViewModel) Render(width, height int) string {
	height = max(height, 3)
	st := newStyles(false)
	if m.Styles != nil {
		st = *m.Styles
	}
	var body []string
	switch {
	case m.Help:
		body = m.helpLines(st)
	case m.Open != "":
		body = m.detailLines(width, st)
	default:
		body = m.tableLines(width, height-1, st)
	}
	body = append([]string{st.Bold.Render(m.Data.Title)}, body...)
	if len(body) > height-1 {
		more := len(body) - (height - 1) + 1
		body = append(body[:height-2], "… "+strconv.Itoa(more)+" more lines")
	}
	for len(body) < height-1 {
		body = append(body, "")
	}
	body = append(body, m.footer())
	for i, line := range body {
		if ansi.StringWidth(line) > width {
			body[i] = ansi.Truncate(line, width, "…")
		}
	}
	return strings.Join(body, "\n")
}

// footer is the last line: the keys that work here.
func (m LeaseViewModel) footer() string {
	switch {
	case m.Help:
		return "esc back  q quit"
	case m.Filtering:
		return "filter: type, enter keep, esc clear  ↑↓ select"
	case m.Open != "":
		return "esc back  ? keys  q quit"
	}
	f := "? keys  / filter  ↑↓ select  enter open"
	if name := m.SortName(); name != "" {
		f += "  s sort:" + name
	}
	return f + "  q quit"
}

func (m LeaseViewModel) helpLines(st Styles) []string {
	out := []string{"", st.Bold.Render("Keys")}
	for _, k := range leaseViewKeys {
		out = append(out, fmt.Sprintf("  %-10s %s", k[0], k[1]))
	}
	if len(m.Sorts) > 0 {
		var keys []string
		for _, o := range m.Sorts {
			keys = append(keys, o.Key+" "+o.Name)
		}
		out = append(out, fmt.Sprintf("  %-10s %s", "sort", strings.Join(keys, ", ")))
	}
	return out
}

func (m LeaseViewModel) detailLines(width int, st Styles) []string {
	out := []string{"", st.Bold.Render("lease " + m.Open)}
	switch {
	case m.DetailErr != "":
		out = append(out, st.Warning.Render(Safe(oneLineText(m.DetailErr))))
	case m.Detail == nil:
		out = append(out, "reading the lease…")
	default:
		for _, l := range LeaseShowLines(*m.Detail) {
			out = append(out, wrapField(Safe(l), width)...)
		}
	}
	return out
}

// wrapField wraps a "FIELD  value" line of LeaseShowLines at width, the continuation lines
// indented under the value, so that nothing of a range or an error is cut off.
func wrapField(line string, width int) []string {
	const indent = 16 // LeaseShowLines' field column
	r := []rune(line)
	if width <= indent+8 || len(r) <= width {
		return []string{line}
	}
	out := []string{string(r[:width])}
	for r = r[width:]; len(r) > 0; {
		n := min(len(r), width-indent)
		out = append(out, strings.Repeat(" ", indent)+string(r[:n]))
		r = r[n:]
	}
	return out
}

func oneLineText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// tableLines are the summary lines and the lease table, in height lines at most, the selected
// row kept in sight.
func (m LeaseViewModel) tableLines(width, height int, st Styles) []string {
	v := m.Data.Estimate
	if v == nil {
		out := []string{"", "waiting for the first estimate…"}
		if m.Data.Status != "" {
			out = append(out, st.Warning.Render(Safe(oneLineText(m.Data.Status))))
		}
		return out
	}
	out := []string{VerdictLine(*v), HostsLine(*v)}
	if m.Data.Host != "" {
		out = append(out, m.Data.Host)
	}
	rows := m.Rows()
	switch {
	case m.Filtering || m.Filter != "":
		cursor := ""
		if m.Filtering {
			cursor = "▏"
		}
		out = append(out, fmt.Sprintf("/%s%s  (%d of %d leases)", Safe(m.Filter), cursor, len(rows), len(v.Leases)))
	default:
		out = append(out, "")
	}
	var status []string
	if m.Data.Status != "" {
		status = append(status, st.Warning.Render(Safe(oneLineText(m.Data.Status))))
	}
	sel := m.selectedIndex(rows)
	if len(rows) > 0 {
		for _, w := range WhyLines(rows[sel]) {
			status = append(status, Safe(w))
		}
	}
	// The title (1 line) is drawn by Render: the table gets what is left of height.
	room := max(height-1-len(out)-1-len(status), 2) // header + rows
	table := LeaseRows(rows, m.Data.Trends, width, sel, st)
	header, lines := table[0], table[1:]
	first := 0
	if visible := room - 1; len(lines) > visible && visible > 0 {
		first = min(max(sel-visible+1, 0), len(lines)-visible)
		lines = lines[first : first+visible]
	}
	out = append(out, header)
	out = append(out, lines...)
	switch {
	case len(rows) == 0 && m.Filter != "":
		out = append(out, "  no lease matches the filter")
	case len(rows) == 0:
		out = append(out, "  the processor has no leases")
	}
	return append(out, status...)
}

// VerdictLine sums up the leases' verdicts and the total lag ("8 leases: 6 ok, 1 stuck, 1
// stalled; total lag 16").
func VerdictLine(v EstimateView) string {
	counts := map[string]int{}
	for _, l := range v.Leases {
		counts[cmp.Or(l.Verdict, l.Progress)]++
	}
	var parts []string
	for _, name := range verdictOrder {
		if n := counts[name]; n > 0 {
			parts = append(parts, strconv.Itoa(n)+" "+name)
			delete(counts, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, strconv.Itoa(counts[name])+" "+name)
	}
	s := fmt.Sprintf("%d leases", len(v.Leases))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	return s + fmt.Sprintf("; total lag %d", v.Summary.TotalLag)
}

// verdictOrder puts the verdicts that need a look first.
var verdictOrder = []string{"stuck", "failing", "stalled", "rewound", "lagging", "ok", "idle"}

// HostsLine says which hosts own the leases and how many each ("hosts: 2 live; web-1 5,
// web-2 3; 1 unowned").
func HostsLine(v EstimateView) string {
	owned := map[string]int{}
	unowned, expired := 0, 0
	for _, l := range v.Leases {
		switch {
		case l.Owner == nil || *l.Owner == "":
			unowned++
		case l.State != StateOwned:
			expired++
		default:
			owned[*l.Owner]++
		}
	}
	names := slices.Sorted(maps.Keys(owned))
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %d", Safe(n), owned[n]))
	}
	s := fmt.Sprintf("hosts: %d live", v.Summary.LiveOwners)
	if len(parts) > 0 {
		s += "; " + strings.Join(parts, ", ")
	}
	if expired > 0 {
		s += fmt.Sprintf("; %d expired", expired)
	}
	if unowned > 0 {
		s += fmt.Sprintf("; %d unowned", unowned)
	}
	return s
}

// A column of the live lease table. Columns with a drop rank go when the table is wider than
// the terminal, lowest rank first; the others (lease, lag, time lag, verdict) stay.
type leaseColumn struct {
	header string
	drop   int // 0: never dropped
	cell   func(l EstimateLease, trend []int64) string
}

// leaseColumns are the columns of the live lease table, left to right. At 80 columns the
// verdict, the lag and the time lag are always shown whole; the owner is cut in its middle
// down to 12 cells before the state goes, and the rest go first.
var leaseColumns = []leaseColumn{
	{"lease", 0, func(l EstimateLease, _ []int64) string { return l.Lease }},
	{"owner", 7, func(l EstimateLease, _ []int64) string { return orZero(l.Owner) }},
	{"state", 6, func(l EstimateLease, _ []int64) string { return l.State }},
	{"range", 2, func(l EstimateLease, _ []int64) string {
		if l.Range == nil {
			return ""
		}
		return RangeText(l.Range.Min, l.Range.Max)
	}},
	{"checkpoint", 4, func(l EstimateLease, _ []int64) string { return LSN(l.CheckpointLSN) }},
	{"latest", 3, func(l EstimateLease, _ []int64) string { return LSN(l.LatestLSN) }},
	{"lag", 0, func(l EstimateLease, _ []int64) string {
		s := strconv.FormatInt(l.Lag, 10)
		if l.Sentinel != nil {
			s += "*"
		}
		return s
	}},
	{"trend", 5, func(_ EstimateLease, t []int64) string {
		if t == nil {
			return ""
		}
		return Sparkline(t)
	}},
	{"time-lag", 0, func(l EstimateLease, _ []int64) string { return Seconds(l.TimeLagSeconds) }},
	{"age", 1, func(l EstimateLease, _ []int64) string { return Seconds(l.AgeSeconds) }},
	{"verdict", 0, func(l EstimateLease, _ []int64) string { return VerdictText(l) }},
}

// ownerMin is the width down to which the owner column is cut before other columns go.
const ownerMin = 12

// LeaseRows renders the live lease table for width cells: the header line, then one line per
// lease, the selected one (index sel) marked with ">" (and reverse video with colour). Lease
// tokens and ranges are abbreviated as in other tables; the owner is cut in its middle.
func LeaseRows(rows []EstimateLease, trends map[string][]int64, width, sel int, st Styles) []string {
	cols := leaseColumns
	if trends == nil {
		cols = slices.DeleteFunc(slices.Clone(cols), func(c leaseColumn) bool { return c.header == "trend" })
	}
	cells := make([][]string, len(cols))
	for j, c := range cols {
		cells[j] = make([]string, len(rows))
		for i, l := range rows {
			v := Safe(c.cell(l, trends[l.Lease]))
			if strings.TrimSpace(v) == "" {
				v = Empty
			}
			cells[j][i] = v
		}
		switch c.header {
		case "lease":
			cells[j] = abbreviateColumn(cells[j], AbbrevToken)
		case "range":
			cells[j] = abbreviateColumn(cells[j], AbbrevRange)
		}
	}
	natural := make([]int, len(cols))
	for j, c := range cols {
		natural[j] = ansi.StringWidth(c.header)
		for _, v := range cells[j] {
			natural[j] = max(natural[j], ansi.StringWidth(v))
		}
	}
	owner := slices.IndexFunc(cols, func(c leaseColumn) bool { return c.header == "owner" })
	keep := make([]bool, len(cols))
	for j := range keep {
		keep[j] = true
	}
	const marker = 2 // "> "
	total := func(ownerWidth int) int {
		n := marker
		for j := range cols {
			if keep[j] {
				w := natural[j]
				if j == owner {
					w = ownerWidth
				}
				n += w + columnGap
			}
		}
		return n - columnGap
	}
	ownerFit := min(natural[owner], ownerMin)
	for rank := 1; total(ownerFit) > width; rank++ {
		j := slices.IndexFunc(cols, func(c leaseColumn) bool { return c.drop == rank })
		if j < 0 {
			break
		}
		keep[j] = false
	}
	widths := slices.Clone(natural)
	if keep[owner] {
		widths[owner] = max(ownerFit, min(natural[owner], width-(total(0))))
		if widths[owner] < natural[owner] {
			cuts, w := middleCuts(cells[owner], widths[owner])
			widths[owner] = w
			for i, v := range cells[owner] {
				cells[owner][i] = cuts[v]
			}
		}
	}
	line := func(mark string, vals func(j int) string) string {
		var b strings.Builder
		b.WriteString(mark)
		first := true
		for j := range cols {
			if !keep[j] {
				continue
			}
			if !first {
				b.WriteString(strings.Repeat(" ", columnGap))
			}
			first = false
			v := vals(j)
			b.WriteString(v + strings.Repeat(" ", max(0, widths[j]-ansi.StringWidth(v))))
		}
		return strings.TrimRight(b.String(), " ")
	}
	out := []string{st.Header.Render(line("  ", func(j int) string { return strings.ToUpper(cols[j].header) }))}
	for i := range rows {
		mark := "  "
		if i == sel {
			mark = "> "
		}
		s := line(mark, func(j int) string { return cells[j][i] })
		if i == sel {
			s = st.Selected.Render(s)
		}
		out = append(out, s)
	}
	return out
}
