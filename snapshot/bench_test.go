package snapshot

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDecode decodes the largest real snapshot from memory (set
// GPUMEM_BENCH_FILE to decode another file, e.g. a tiled one from bench/).
func BenchmarkDecode(b *testing.B) {
	path := os.Getenv("GPUMEM_BENCH_FILE")
	if path == "" {
		path = filepath.Join(corpusDir(b), "cs336-notHanmin__memory_snapshot.pickle")
	}
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

// BenchmarkOpen decodes the same file through the streaming reader.
func BenchmarkOpen(b *testing.B) {
	path := os.Getenv("GPUMEM_BENCH_FILE")
	if path == "" {
		path = filepath.Join(corpusDir(b), "cs336-notHanmin__memory_snapshot.pickle")
	}
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
