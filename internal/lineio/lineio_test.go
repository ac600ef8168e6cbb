package lineio

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReader_Limits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		in    string
		want  []string // lines, or "!long", "!array", "!endless" for errors
		limit int
		skip  int64
	}{
		{"plain lines", "a\nbb\n\nc", []string{"a\n", "bb\n", "\n", "c"}, 8, 64},
		{"a line of exactly the limit", "1234567\nx\n", []string{"1234567\n", "x\n"}, 8, 64},
		{"an over-long line is skipped to its end", "ok\n123456789abc\nnext\n", []string{"ok\n", "!long", "next\n"}, 8, 64},
		{"an over-long array line", "  [1,2,3,4,5,6,7,8]\nnext", []string{"!array", "next"}, 8, 64},
		{"an over-long last line", "ok\n123456789abc", []string{"ok\n", "!long"}, 8, 64},
		{"a line without end beyond the skip limit", "ok\n" + strings.Repeat("0", 500), []string{"ok\n", "!endless"}, 8, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewReaderLimits(strings.NewReader(tt.in), tt.limit, tt.skip)
			var got []string
			for {
				line, err := r.Next()
				var tl *TooLongError
				var nl *NoLineEndError
				switch {
				case errors.Is(err, io.EOF):
				case errors.As(err, &tl) && tl.Array:
					got = append(got, "!array")
					continue
				case errors.As(err, &tl):
					got = append(got, "!long")
					continue
				case errors.As(err, &nl):
					got = append(got, "!endless")
					if _, err := r.Next(); !errors.Is(err, io.EOF) {
						t.Errorf("after an endless line Next = %v, want EOF", err)
					}
				case err != nil:
					t.Fatal(err)
				default:
					got = append(got, string(line))
					continue
				}
				break
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadAll_Limit(t *testing.T) {
	t.Parallel()
	if b, err := ReadAll(strings.NewReader("12345"), "f", 5); err != nil || string(b) != "12345" {
		t.Errorf("ReadAll at the limit = %q, %v", b, err)
	}
	var tl *TooLargeError
	if _, err := ReadAll(strings.NewReader("123456"), "f", 5); !errors.As(err, &tl) || err.Error() != "f is larger than 5 bytes" {
		t.Errorf("ReadAll over the limit: %v", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add("a\nbb\n", 4)
	f.Add("[[[[[[[[[[\n", 3)
	f.Fuzz(func(t *testing.T, in string, limit int) {
		limit = 1 + (limit&0xff)%64
		r := NewReaderLimits(strings.NewReader(in), limit, 256)
		for range len(in) + 2 {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if len(line) > limit {
				t.Fatalf("line of %d bytes over the limit %d", len(line), limit)
			}
		}
		t.Fatalf("more calls than input bytes without EOF")
	})
}
