package leases_test

import (
	"os"
	"testing"

	"github.com/cfp-dev/cfp/internal/leases"
)

func benchDoc(b *testing.B, file string) leases.Document {
	body, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	return leases.Document{Body: body}
}

func BenchmarkDecode(b *testing.B) {
	for _, file := range []string{"testdata/corpus/dotnet-v0-in-use.json", "testdata/corpus/java-epk.json"} {
		doc := benchDoc(b, file)
		b.Run(file[len("testdata/corpus/"):], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := leases.Decode(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeCheckpoint(b *testing.B) {
	for _, file := range []string{"testdata/corpus/dotnet-v0-in-use.json", "testdata/corpus/java-epk.json"} {
		l, err := leases.Decode(benchDoc(b, file))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(file[len("testdata/corpus/"):], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				l.Continuation = `"48214"`
				if _, err := leases.Encode(l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
