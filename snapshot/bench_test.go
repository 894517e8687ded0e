package snapshot

import (
	"os"
	"testing"

	"github.com/gpumem/gpumem/internal/corpus"
)

// benchFile is the file the benchmarks decode: the largest real snapshot,
// or GPUMEM_BENCH_FILE (e.g. a tiled one from bench/).
func benchFile(b *testing.B) string {
	if path := os.Getenv("GPUMEM_BENCH_FILE"); path != "" {
		return path
	}
	return corpus.File(b, "cs336-notHanmin__memory_snapshot.pickle")
}

// BenchmarkDecode decodes benchFile from memory.
func BenchmarkDecode(b *testing.B) {
	path := benchFile(b)
	data, err := os.ReadFile(path)
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeBytes(data, path, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen decodes benchFile through the streaming reader.
func BenchmarkOpen(b *testing.B) {
	path := benchFile(b)
	st, err := os.Stat(path)
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(st.Size())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(path, nil); err != nil {
			b.Fatal(err)
		}
	}
}
