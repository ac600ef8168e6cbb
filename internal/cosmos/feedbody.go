package cosmos

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	azruntime "github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// The change feed's page body is {"_rid":...,"Documents":[...],"_count":n}. azcosmos decodes it
// whole with encoding/json into one json.RawMessage per document (validating and copying every
// byte), which was three quarters of cfp tail's CPU; cfp only forwards the documents. So the
// feedBodyPolicy keeps azcosmos for the request (auth, routing, retries, 410 handling,
// continuations) but splits the page's documents itself with splitFeedBody, as sub-slices of
// the body, and hands azcosmos the same body with an empty Documents array: azcosmos then reads
// the same _rid, _count, headers and status it would have read, and does the same thing.

// rawFeedKey is the context key of the rawFeed of one ReadPage call.
type rawFeedKey struct{}

// rawFeed receives the documents of the last change-feed response of one ReadPage call that the
// feedBodyPolicy split. ok is false when that response was not split (not a 200, or a body the
// scanner does not take): azcosmos then decoded the documents itself.
type rawFeed struct {
	docs []json.RawMessage
	ok   bool
	// reuse: the page's body may come from and go back to pageBuffers (ReadRequest.Reuse);
	// buf is that buffer, when the body was read into one.
	reuse bool
	buf   *[]byte
}

// feedBodyPolicy takes the documents out of the change-feed responses of ReadPage calls (those
// whose context carries a *rawFeed): see above. It is a per-call policy, so it sees the final
// response, after azcosmos's and azcore's retries. Any other request or response passes
// untouched, and so does a body splitFeedBody refuses.
type feedBodyPolicy struct{}

func (feedBodyPolicy) Do(req *policy.Request) (*http.Response, error) {
	raw := req.Raw()
	resp, err := req.Next()
	if !splitFeedRead(raw) {
		return resp, err
	}
	hold := raw.Context().Value(rawFeedKey{}).(*rawFeed)
	hold.docs, hold.ok, hold.buf = nil, false, nil
	if err != nil || resp == nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	var body []byte
	if fb, ok := resp.Body.(*feedBytes); ok {
		body = fb.b // read whole by the request policy
		hold.buf = fb.buf
	} else {
		var perr error
		if body, perr = azruntime.Payload(resp); perr != nil {
			return resp, err // azcosmos meets the same read error
		}
	}
	hint, _ := strconv.Atoi(resp.Header.Get("x-ms-item-count"))
	docs, rest, serr := splitFeedBody(body, hint)
	if serr != nil {
		return resp, err // azcosmos decodes it (and reports what is wrong with it)
	}
	hold.docs, hold.ok = docs, true
	resp.Body = &bodyReader{Reader: bytes.NewReader(rest)}
	resp.ContentLength = int64(len(rest))
	return resp, err
}

// splitFeedRead reports whether raw is a change-feed read of a ReadPage call: one whose
// response body the feedBodyPolicy splits.
func splitFeedRead(raw *http.Request) bool {
	hold, _ := raw.Context().Value(rawFeedKey{}).(*rawFeed)
	return hold != nil && raw.Method == http.MethodGet && raw.Header.Get("A-IM") != "" && strings.HasSuffix(raw.URL.Path, "/docs")
}

// feedBytes is the body of a change-feed page that the request policy read whole, b; buf
// holds it when it came from pageBuffers.
type feedBytes struct {
	*bytes.Reader
	b   []byte
	buf *[]byte
}

func (*feedBytes) Close() error { return nil }

// readFeedBody replaces resp's body by a *feedBytes holding it whole, read into one buffer of
// the announced Content-Length. azcore's body download would read it into buffers of growing
// sizes, then copy them into one: at ~1 MB pages of 1 KB documents, allocating, zeroing and
// copying twice the page was an eighth of cfp tail's CPU. A body of unknown length (a
// compressed one; or 0, which a hand-made response may leave) is read with io.ReadAll.
//
// With reuse (the caller releases the page, ReadRequest.Reuse), the buffer comes from
// pageBuffers and is not zeroed first: a buffer per page was allocated, zeroed and faulted in
// anew, a fifth of cfp tail's CPU at 1 KB documents.
func readFeedBody(resp *http.Response, reuse bool) error {
	var b []byte
	var buf *[]byte
	var err error
	if n := resp.ContentLength; n > 0 && n <= maxExactBody {
		if reuse {
			buf = getPageBuffer(int(n))
			b = (*buf)[:n]
		} else {
			b = make([]byte, n)
		}
		_, err = io.ReadFull(resp.Body, b)
	} else {
		b, err = io.ReadAll(resp.Body)
	}
	_ = resp.Body.Close()
	if err != nil {
		putPageBuffer(buf)
		return fmt.Errorf("read change-feed page: %w", err)
	}
	resp.Body = &feedBytes{Reader: bytes.NewReader(b), b: b, buf: buf}
	return nil
}

// pageBuffers holds released change-feed page buffers (*[]byte) for reuse, one pool per size
// class (pageClassSizes): a page takes a buffer of the smallest class it fits, at most a quarter
// (or 4 KB) larger than itself. The tail holds a page per range while the ranges wait for the
// output, so a buffer much larger than its page would multiply the tail's memory by the number
// of ranges (with a 1 MB floor, 32 ranges of 2 KB pages held 39 MB instead of 3 MB).
var pageBuffers = make([]sync.Pool, len(pageClassSizes))

// pageClassSizes are the buffer sizes of pageBuffers: from 4 KB, each a quarter larger than the
// one before (rounded up to 4 KB), the last maxExactBody.
var pageClassSizes = func() []int {
	var sizes []int
	for n := 4 << 10; ; n = (n + n/4 + 4<<10 - 1) &^ (4<<10 - 1) {
		if n >= maxExactBody {
			return append(sizes, maxExactBody)
		}
		sizes = append(sizes, n)
	}
}()

// getPageBuffer returns a buffer of at least n bytes (n <= maxExactBody), whatever it holds.
func getPageBuffer(n int) *[]byte {
	c, _ := slices.BinarySearch(pageClassSizes, n)
	if p, ok := pageBuffers[c].Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, n, pageClassSizes[c])
	return &b
}

// putPageBuffer hands buf back for reuse (nil: nothing), to the largest class it holds.
func putPageBuffer(buf *[]byte) {
	if buf == nil {
		return
	}
	c, found := slices.BinarySearch(pageClassSizes, cap(*buf))
	if !found {
		c--
	}
	if c >= 0 {
		pageBuffers[c].Put(buf)
	}
}

// maxExactBody bounds the Content-Length readFeedBody allocates up front (a page is at most a
// few megabytes; a larger announced length is read as it comes).
const maxExactBody = 64 << 20

// bodyReader is the response body handed to azcosmos in place of the page's.
type bodyReader struct{ *bytes.Reader }

func (*bodyReader) Close() error { return nil }

// errFeedBodyUnsupported marks a body that splitFeedBody leaves to encoding/json: not an object, a
// key spelt with escapes or another letter case, a repeated or missing Documents or _count, a
// Documents that is not an array, a _count that is not the number of documents.
var errFeedBodyUnsupported = errors.New("feed body left to encoding/json")

// maxJSONDepth is encoding/json's nesting limit, which splitFeedBody keeps too.
const maxJSONDepth = 10000

// splitFeedBody splits a feed page body {"_rid":...,"Documents":[...],"_count":n} into its
// documents, sub-slices of body (exactly the bytes json.RawMessage would hold, whitespace around
// them excluded), and rest: a copy of body whose Documents array is empty, every other member
// kept byte for byte. It accepts exactly the bodies that encoding/json accepts as JSON, and
// returns an error wrapping errFeedBodyUnsupported for the ones it leaves to encoding/json
// (which may stop before the end of the body: valid or not, encoding/json then judges it). hint, when positive, is the expected number of documents.
func splitFeedBody(body []byte, hint int) (docs []json.RawMessage, rest []byte, err error) {
	s := jsonScanner{b: body}
	s.ws()
	if !s.consume('{') {
		return nil, nil, errFeedBodyUnsupported // not an object: leave it to encoding/json
	}
	s.depth = 1
	arrOpen, arrClose := -1, -1
	count := ""
	s.ws()
	if !s.consume('}') {
		for {
			s.ws()
			ks := s.i
			if err := s.str(); err != nil {
				return nil, nil, err
			}
			key := body[ks+1 : s.i-1]
			s.ws()
			if !s.consume(':') {
				return nil, nil, s.syntax("want ':'")
			}
			s.ws()
			switch {
			case bytes.IndexByte(key, '\\') >= 0:
				return nil, nil, errFeedBodyUnsupported // could spell Documents or _count
			case string(key) == "Documents":
				if arrOpen >= 0 {
					return nil, nil, errFeedBodyUnsupported
				}
				arrOpen = s.i
				if docs, err = s.array(docs, hint); err != nil {
					return nil, nil, err
				}
				arrClose = s.i - 1
			case string(key) == "_count":
				if count != "" {
					return nil, nil, errFeedBodyUnsupported
				}
				vs := s.i
				if err := s.value(); err != nil {
					return nil, nil, err
				}
				count = string(body[vs:s.i])
			case bytes.EqualFold(key, []byte("Documents")) || bytes.EqualFold(key, []byte("_count")):
				return nil, nil, errFeedBodyUnsupported // encoding/json would match it
			default:
				if err := s.value(); err != nil {
					return nil, nil, err
				}
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				break
			}
			return nil, nil, s.syntax("want ',' or '}'")
		}
	}
	s.ws()
	if s.i != len(body) {
		return nil, nil, s.syntax("data after the object")
	}
	if arrOpen < 0 || count == "" {
		return nil, nil, errFeedBodyUnsupported
	}
	if n, err := strconv.Atoi(count); err != nil || n != len(docs) {
		return nil, nil, fmt.Errorf("%w: _count %s for %d documents", errFeedBodyUnsupported, count, len(docs))
	}
	rest = make([]byte, 0, len(body)-(arrClose-arrOpen-1))
	rest = append(rest, body[:arrOpen+1]...)
	rest = append(rest, body[arrClose:]...)
	return docs, rest, nil
}

// jsonScanner walks JSON text, validating it as encoding/json does, without decoding it.
type jsonScanner struct {
	b     []byte
	i     int
	depth int
}

func (s *jsonScanner) syntax(what string) error {
	return fmt.Errorf("invalid feed body at offset %d: %s", s.i, what)
}

func (s *jsonScanner) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// array scans the array at s.i and appends its elements to out.
func (s *jsonScanner) array(out []json.RawMessage, hint int) ([]json.RawMessage, error) {
	if !s.consume('[') {
		return nil, errFeedBodyUnsupported // null or another type: leave it to encoding/json
	}
	if hint > 0 {
		out = make([]json.RawMessage, 0, min(hint, len(s.b)/2))
	}
	if err := s.members(']', &out); err != nil {
		return nil, err
	}
	if out == nil {
		out = []json.RawMessage{}
	}
	return out, nil
}

// members scans the rest of an object (closer '}') or an array (closer ']') whose opening byte
// s.i has just passed, through its closing byte. With spans set, it appends each member's value
// (each element of the array) to *spans, as a sub-slice of the text.
func (s *jsonScanner) members(closer byte, spans *[]json.RawMessage) error {
	if s.depth++; s.depth > maxJSONDepth {
		return s.syntax("nested too deeply")
	}
	s.ws()
	if s.consume(closer) {
		s.depth--
		return nil
	}
	for {
		s.ws()
		if closer == '}' {
			if err := s.str(); err != nil {
				return err
			}
			s.ws()
			if !s.consume(':') {
				return s.syntax("want ':'")
			}
			s.ws()
		}
		start := s.i
		if err := s.value(); err != nil {
			return err
		}
		if spans != nil {
			*spans = append(*spans, s.b[start:s.i:s.i])
		}
		s.ws()
		if s.consume(',') {
			continue
		}
		if s.consume(closer) {
			s.depth--
			return nil
		}
		if closer == '}' {
			return s.syntax("want ',' or '}'")
		}
		return s.syntax("want ',' or ']'")
	}
}

// value scans one JSON value at s.i.
func (s *jsonScanner) value() error {
	if s.i >= len(s.b) {
		return s.syntax("unexpected end")
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{', c == '[':
		s.i++
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		return s.members(closer, nil)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	default:
		return s.syntax("want a value")
	}
}

func (s *jsonScanner) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.syntax("want " + lit)
	}
	s.i += len(lit)
	return nil
}

// shortString is how many bytes of a string str reads with its own eight-byte steps before it
// calls bytes.IndexByte, whose call costs more than a short string's whole scan but which then
// reads 16 or 32 bytes a step (BenchmarkSplitFeedBody: 17% less CPU with a 940-byte payload,
// the same with a 140-byte one; IndexByte from the first byte made the latter slower).
const shortString = 32

// plainString marks the bytes a string holds as they are: not a quote, a backslash or a control
// character.
var plainString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// specialIn reports whether any of the eight bytes in x is a quote, a backslash or a control
// character (the SWAR tests of "Bit Twiddling Hacks": hasless and haszero).
func specialIn(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	zero := func(v uint64) uint64 { return (v - ones) &^ v & highs }
	return ((x-ones*0x20)&^x&highs)|zero(x^(ones*'"'))|zero(x^(ones*'\\')) != 0
}

// str scans a string at s.i, escapes checked (bytes are not checked for UTF-8, as in
// encoding/json).
func (s *jsonScanner) str() error {
	if !s.consume('"') {
		return s.syntax("want a string")
	}
	b := s.b
	i := s.i
	// Most strings are short (keys, ids, system properties): eight bytes at a time while none is
	// special, then byte by byte, over the first shortString bytes.
	end := min(len(b), i+shortString)
	for i+8 <= end && !specialIn(binary.LittleEndian.Uint64(b[i:])) {
		i += 8
	}
	for i < end && plainString[b[i]] {
		i++
	}
	if i < len(b) && b[i] == '"' {
		s.i = i + 1
		return nil
	}
	// A longer string, or an escape or a control character at i.
	// quote is the next quote at or after i (found with bytes.IndexByte, which reads 16 or 32
	// bytes at a time); it is searched for again only once an escape moved i past it, so a
	// string full of escapes is still read once.
	quote := -1
	for {
		if quote < i {
			q := bytes.IndexByte(b[i:], '"')
			if q < 0 {
				s.i = len(b)
				return s.syntax("unterminated string")
			}
			quote = i + q
		}
		span := b[i:quote]
		esc := bytes.IndexByte(span, '\\')
		if esc >= 0 {
			span = span[:esc]
		}
		if c := indexControl(span); c >= 0 {
			s.i = i + c
			return s.syntax("control character in string")
		}
		if esc < 0 {
			s.i = quote + 1
			return nil
		}
		i += esc + 1 // just after the backslash
		if i >= len(b) {
			s.i = i
			return s.syntax("unterminated string")
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i++
		case 'u':
			if i+4 >= len(b) {
				s.i = i
				return s.syntax("short \\u escape")
			}
			for _, h := range b[i+1 : i+5] {
				if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
					s.i = i
					return s.syntax("bad \\u escape")
				}
			}
			i += 5
		default:
			s.i = i
			return s.syntax("bad escape")
		}
	}
}

// indexControl returns the index of the first control character (below 0x20) in b, or -1:
// 32 bytes at a time, then eight (hasless of "Bit Twiddling Hacks"), then byte by byte.
func indexControl(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32 : i+32]
		x0, x1 := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		x2, x3 := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if ((x0-ones*0x20)&^x0|(x1-ones*0x20)&^x1|(x2-ones*0x20)&^x2|(x3-ones*0x20)&^x3)&highs != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if x := binary.LittleEndian.Uint64(b[i:]); (x-ones*0x20)&^x&highs != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? at s.i.
func (s *jsonScanner) number() error {
	b := s.b
	i := s.i
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		s.i = i
		return s.syntax("bad number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			s.i = i
			return s.syntax("bad number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			s.i = i
			return s.syntax("bad number")
		}
	}
	s.i = i
	return nil
}
