package epk

import (
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// v2Vectors pairs azcosmos's baseline (unmasked, from its
// internal/epk/testdata) with the value both SDKs route with (masked).
var v2Vectors = []struct {
	name      string
	component any
	raw       string
	masked    string
}{
	{"undefined", Undefined{}, "51622DAA78F835834610ABE56EFF5CB5", "11622DAA78F835834610ABE56EFF5CB5"},
	{"null", nil, "778867E4430E67857ACE5C908374FE16", "378867E4430E67857ACE5C908374FE16"},
	{"true", true, "4E711127C5B5A8E4726AC6DD306A3E59", "0E711127C5B5A8E4726AC6DD306A3E59"},
	{"false", false, "EFE1BE91E90A3439635E0E9E37361EF2", "2FE1BE91E90A3439635E0E9E37361EF2"},
	{"empty string", "", "B2E9366E637A71B4E710384B2F4970A0", "32E9366E637A71B4E710384B2F4970A0"},
	{"asdf", "asdf", "608BF1D598F5B63AD5520F04FE58C5E8", "208BF1D598F5B63AD5520F04FE58C5E8"},
	{"a x 101", strings.Repeat("a", 101), "88042541D30C8BF90D7092B1519AE0BC", "08042541D30C8BF90D7092B1519AE0BC"},
	{"a x 100", strings.Repeat("a", 100), "8DBD7D229437BB665DE6417747994D57", "0DBD7D229437BB665DE6417747994D57"},
	{"a x 99", strings.Repeat("a", 99), "3C02F609961C32AAC2B912B940D1209A", "3C02F609961C32AAC2B912B940D1209A"},
	{"0", 0.0, "555B95BEDAC4B1E9EC1CDC9BB0DDDE58", "155B95BEDAC4B1E9EC1CDC9BB0DDDE58"},
	{"-0", math.Copysign(0, -1), "3D018BB1DF3DB27235766E81FD10406E", "3D018BB1DF3DB27235766E81FD10406E"},
	{"1", 1.0, "A0CD98B339BA78A5D0CF6953B87070B0", "20CD98B339BA78A5D0CF6953B87070B0"},
	{"-1", -1.0, "59938E7A936C1C5B9E3AE842BBC16839", "19938E7A936C1C5B9E3AE842BBC16839"},
	{"2^53-1", 9007199254740991.0, "12C221C7032CED1F9E6693CE1428E6CF", "12C221C7032CED1F9E6693CE1428E6CF"},
	{"2^53", 9007199254740992.0, "55335910D01122E3D99DA5DE569B065D", "15335910D01122E3D99DA5DE569B065D"},
	{"5E-324", 5e-324, "0E6CBA63A280927DE485DEF865800139", "0E6CBA63A280927DE485DEF865800139"},
}

func TestHashV2_BaselineVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range v2Vectors {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := rawV2(tc.component)
			if got := strings.ToUpper(hex.EncodeToString(raw[:])); got != tc.raw {
				t.Errorf("raw V2 of %v = %s, want %s", tc.component, got, tc.raw)
			}
			if got := HashV2([]any{tc.component}); got != tc.masked {
				t.Errorf("HashV2(%v) = %s, want %s", tc.component, got, tc.masked)
			}
		})
	}
}

// TestHashV2_JSVectors checks the masked values the JS SDK's
// hashV2PartitionKey produced, including the MultiHash pair.
func TestHashV2_JSVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  []any
		want string
	}{
		{[]any{"a"}, "3A5381E1114EB8D3FCC90795045B49B7"},
		{[]any{"hello"}, "0A8B5792B7BA3C7C47B0D1305A3C6F8A"},
		{[]any{"tenant-1"}, "1B6E36CBA1839DF91310617831CA7FAC"},
		{[]any{"p0"}, "03A4DE7195849FD7388755761E4E5CC0"},
		{[]any{"p1"}, "062B23DEC15212F01B9A85F4E93A940C"},
		{[]any{"p2"}, "3168F37E29288C0DC65558485479060F"},
		{[]any{"p3"}, "271119C968E6C80FA31EC9F0033A0CBB"},
		{[]any{5.0}, "19C08621B135968252FB34B4CF66F811"},
		{[]any{1.5}, "35C5DDEB6C795D16A9963C73C54E97BC"},
		{[]any{"a", "b"}, "3A5381E1114EB8D3FCC90795045B49B7195644569A78B1E22D200348AF9416CE"},
	}
	for _, tc := range tests {
		if got := HashV2(tc.key); got != tc.want {
			t.Errorf("HashV2(%v) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

// TestHashV2_GoMultiHashBaselines checks the unmasked per-component
// baselines of azcosmos's epk_test.go.
func TestHashV2_GoMultiHashBaselines(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/path1": "B499FD5198AE0F1EB6B77F6E428D2FF0",
		"/path2": "E7A1848BD1102A3B65AFF266874D0FF5",
	} {
		raw := rawV2(in)
		if got := strings.ToUpper(hex.EncodeToString(raw[:])); got != want {
			t.Errorf("raw V2 of %q = %s, want %s", in, got, want)
		}
	}
	got := HashV2([]any{"/path1", "/path2"})
	if want := "3499FD5198AE0F1EB6B77F6E428D2FF0" + "27A1848BD1102A3B65AFF266874D0FF5"; got != want {
		t.Errorf("MultiHash = %s, want %s", got, want)
	}
}

func TestHashV2_NumberTypesHashAlike(t *testing.T) {
	t.Parallel()
	want := HashV2([]any{5.0})
	for _, v := range []any{5, int64(5), int32(5), uint8(5), float32(5), json.Number("5"), json.Number("5.0"), json.Number("0.5e1")} {
		if got := HashV2([]any{v}); got != want {
			t.Errorf("HashV2(%T %v) = %s, want %s like float64 5", v, v, got, want)
		}
	}
}

func TestHashV2_MaskKeepsBelowFF(t *testing.T) {
	t.Parallel()
	for i := range 2000 {
		got := HashV2([]any{float64(i), "k" + strings.Repeat("x", i%40)})
		if len(got) != 64 {
			t.Fatalf("len = %d, want 64", len(got))
		}
		for _, part := range []string{got[:32], got[32:]} {
			if part[0] > '3' || part != strings.ToUpper(part) {
				t.Fatalf("component hash %s is not masked upper-case hex", part)
			}
		}
	}
	if got := HashV2(nil); got != "" {
		t.Errorf("HashV2(nil) = %q, want the minimum EPK \"\"", got)
	}
}

// TestMurmur3_SMHasherVerification runs SMHasher's VerificationTest: keys
// 0x00, 0x01, ... of every length 0..255 (so every tail length), hashed with
// seed 256-len, the hashes hashed again with seed 0; the low 32 bits must be
// 0x6384BA69, the published value for MurmurHash3_x64_128.
func TestMurmur3_SMHasherVerification(t *testing.T) {
	t.Parallel()
	key := make([]byte, 256)
	hashes := make([]byte, 16*256)
	for i := range 256 {
		key[i] = byte(i)
		h1, h2 := murmur3x64128(key[:i], uint64(256-i))
		putLE(hashes[i*16:], h1)
		putLE(hashes[i*16+8:], h2)
	}
	h1, _ := murmur3x64128(hashes, 0)
	if got := uint32(h1); got != 0x6384BA69 {
		t.Errorf("verification value = %#08X, want 0x6384BA69", got)
	}
}

func putLE(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func BenchmarkHashV2(b *testing.B) {
	b.ReportAllocs()
	key := []any{"tenant-1", 42.0}
	for b.Loop() {
		HashV2(key)
	}
}

func TestPathSegments(t *testing.T) {
	for path, want := range map[string][]string{
		"/pk":                      {"pk"},
		"/a/b":                     {"a", "b"},
		`/"le/vel"/x`:              {"le/vel", "x"},
		`/'a"b'/"c'd"`:             {`a"b`, `c'd`},
		`/"level' 1*()"/"le/vel2"`: {"level' 1*()", "le/vel2"},
		`/"a\"/b"`:                 {`a\"/b`},
		`/"unclosed/x`:             {`"unclosed`, "x"},
	} {
		if got := PathSegments(path); strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
			t.Errorf("PathSegments(%s) = %q, want %q", path, got, want)
		}
	}
}
