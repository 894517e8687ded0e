// Command hostile runs gpumem's snapshot-reading commands on hostile
// inputs (decompression bombs, strings longer than the input, truncated,
// random, deeply nested, self-containing, not a snapshot, a pipe) and
// prints, per input and command, the exit status, the lines on stderr,
// the peak RSS and the wall time: every one should be exit 1 (0 for the
// pipe of a real file), one line, bounded memory.
//
//	go build -o /tmp/gpumem ./cmd/gpumem
//	go run ./bench/hostile -gpumem /tmp/gpumem -real ../shared/snapshots/real/BlockZero__cuda_snapshot.pickle
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

func main() {
	bin := flag.String("gpumem", "gpumem", "the gpumem binary")
	real := flag.String("real", "", "a real snapshot (for diff, ranks and the pipe)")
	flag.Parse()
	if *real == "" {
		fmt.Fprintln(os.Stderr, "usage: hostile -gpumem BIN -real FILE")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "hostile")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	realBytes, err := os.ReadFile(*real)
	if err != nil {
		fail(err)
	}
	le64 := func(n uint64) []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, n); return b }
	// gzOf compresses head, n bytes 'a' (written a MiB at a time) and tail.
	gzOf := func(head []byte, n int, tail []byte) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write(head)
		for chunk := bytes.Repeat([]byte{'a'}, 1<<20); n > 0; n -= len(chunk) {
			zw.Write(chunk[:min(n, len(chunk))])
		}
		zw.Write(tail)
		zw.Close()
		return b.Bytes()
	}
	ones := func(n int) []byte { return bytes.Repeat([]byte{'a'}, n) }
	var zs bytes.Buffer
	zw, _ := zstd.NewWriter(&zs, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	zw.Write([]byte(`{"segments": [], "x": "`))
	for range 512 {
		zw.Write(ones(1 << 20))
	}
	zw.Write([]byte(`"}`))
	zw.Close()
	rnd := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(rnd)
	inputs := []struct {
		name string
		data []byte
	}{
		{"1 GiB string, gzip (1 MB)", gzOf(append([]byte("\x80\x04\x8d"), le64(1<<30)...), 1<<30, []byte("\x94."))},
		{"512 MiB JSON string, zstd", zs.Bytes()},
		{"string claiming 4 TiB", append(append([]byte("\x80\x04\x8d"), le64(1<<42)...), "abc"...)},
		{"truncated real file", realBytes[:len(realBytes)/2]},
		{"random 1 MiB", rnd},
		{"1,000,000 nested lists", append(append([]byte("\x80\x04"), bytes.Repeat([]byte("]"), 1_000_000)...), '.')},
		{"list containing itself", []byte("\x80\x04\x95\x17\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94]\x94h\x03aas.")},
		{"PNG, not a snapshot", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")},
		{"bad gzip header", []byte("\x1f\x8bxxxxxxxxxxxxxxxxxx")},
	}
	cmds := [][]string{{"info"}, {"diff", *real}, {"ranks", *real}, {"html", "-o", filepath.Join(dir, "out.html")},
		{"export", "pprof", "-o", filepath.Join(dir, "out.pb.gz")}, {"export", "perfetto", "-o", filepath.Join(dir, "out.json")},
		{"flame", "memory", "-o", filepath.Join(dir, "out.svg")}, {"peak"}, {"oom"}}
	fmt.Println("| input | command | exit | stderr lines | peak RSS | wall | first line of stderr |")
	fmt.Println("|---|---|---:|---:|---:|---:|---|")
	run := func(name string, args []string, stdin []byte) {
		// Through time(1): a child forked from this process would report
		// this process's peak RSS as its own.
		cmd := exec.Command("/usr/bin/time", append([]string{"-q", "-f", "%M", *bin}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		t0 := time.Now()
		_ = cmd.Run()
		wall := time.Since(t0)
		msg := strings.TrimRight(stderr.String(), "\n")
		rss := int64(0)
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 || msg != "" {
			fmt.Sscan(msg[i+1:], &rss)
			msg = msg[:max(i, 0)]
		}
		first, _, _ := strings.Cut(msg, "\n")
		if len(first) > 140 {
			first = first[:140] + "…"
		}
		lines := 0
		if msg != "" {
			lines = strings.Count(msg, "\n") + 1
		}
		fmt.Printf("| %s | %s | %d | %d | %.0f MB | %.2f s | `%s` |\n", name, label(args), cmd.ProcessState.ExitCode(), lines,
			float64(rss)/1024, wall.Seconds(), strings.ReplaceAll(strings.ReplaceAll(first, dir+"/", ""), "|", "\\|"))
	}
	for k, in := range inputs {
		p := filepath.Join(dir, fmt.Sprintf("input%d", k))
		if err := os.WriteFile(p, in.data, 0o644); err != nil {
			fail(err)
		}
		for _, c := range cmds {
			args := append([]string{c[0]}, c[1:]...)
			switch c[0] {
			case "diff", "ranks":
				args = append(args, p)
			case "export", "flame":
				args = append(args[:2:2], append([]string{p}, args[2:]...)...)
			default:
				args = append(args, p)
			}
			run(in.name, args, nil)
		}
		os.Remove(p)
	}
	// A real snapshot through a pipe (gpumem info <(cat x)) and on stdin.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err == nil {
		go func() {
			f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err == nil {
				f.Write(realBytes)
				f.Close()
			}
		}()
		run("real file through a FIFO", []string{"info", fifo}, nil)
	}
	run("1 GiB string, gzip, on stdin", []string{"info", "-"}, inputs[0].data)
}

// label is a command's name: "info", "export pprof".
func label(args []string) string {
	if args[0] == "export" || args[0] == "flame" {
		return args[0] + " " + args[1]
	}
	return args[0]
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "hostile:", err)
	os.Exit(1)
}
