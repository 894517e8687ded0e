// Command mem runs one gpumem command in-process and says where its
// resident memory goes at its peak: a heap profile taken at the highest
// resident set seen, and the kernel's split of that resident set
// (anonymous memory: the Go heap and runtime; file pages: the mapped
// snapshot). Peak RSS is robust to a busy machine, unlike wall time.
//
//	go run ./bench/mem [-heap FILE] [-every 2ms] -- info FILE
//	go run ./bench/mem -for 100s -drive http://127.0.0.1:8123 -- serve -no-browser -http 127.0.0.1:8123 FILE
//
// It prints the peak VmHWM, the anonymous and file-backed RSS at the
// highest sample, and the Go heap's own accounting at that moment; -heap
// writes the heap profile taken there (read it with
// `go tool pprof -sample_index=inuse_space -top`).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpumem/gpumem/internal/cli"
)

// sample is one reading of /proc/self/status.
type sample struct {
	rss, anon, file, hwm int64 // KiB
	heapInuse, heapSys   uint64
	at                   time.Duration
}

func readStatus() (s sample) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return s
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			s.rss = v
		case "RssAnon:":
			s.anon = v
		case "RssFile:":
			s.file = v
		case "VmHWM:":
			s.hwm = v
		}
	}
	return s
}

func main() {
	heap := flag.String("heap", "", "write the heap profile taken at the highest RSS here")
	every := flag.Duration("every", 2*time.Millisecond, "sampling interval")
	quiet := flag.Bool("q", true, "discard the command's standard output")
	runFor := flag.Duration("for", 0, "report after this long and exit, the command still running (for serve, driven from outside meanwhile)")
	driveURL := flag.String("drive", "", "with -for: ask the server at this `URL` (http://127.0.0.1:PORT) what the viewer bench's page asks (see drive)")
	firstOnly := flag.Bool("first", false, "with -drive: stop once the first window is answered (a -cpuprofile of the serve path to the first paint)")
	atOnce := flag.Bool("at-once", false, "with -drive: zoom right after the first window, the curves and markers asked for meanwhile")
	answers := flag.Bool("answers", false, "with -drive: also ask for the peak, classes and fragmentation answers")
	page := flag.Bool("page", false, "with -drive: ask what browsertests/bench's page asks, in its order (the peak's answer and the curves beside the zooms), and stop right after the state steps, where that bench reads the server's peak RSS")
	gc := flag.Bool("gc", false, "collect before each profile, so that it shows the live heap of that moment (a profile otherwise shows the heap at the last collection)")
	cpu := flag.String("cpuprofile", "", "write a CPU profile of the command here (with -heap, the heap profiles' collections are in it)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mem [-heap FILE] -- COMMAND ARGS...")
		os.Exit(2)
	}
	runtime.MemProfileRate = 64 << 10
	if *cpu != "" {
		f, err := os.Create(*cpu)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}

	var (
		mu   sync.Mutex
		best sample
		prof []byte
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	t0 := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(*every)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			s := readStatus()
			s.at = time.Since(t0)
			mu.Lock()
			grow := s.rss > best.rss+best.rss/50 || best.rss == 0
			mu.Unlock()
			if !grow {
				continue
			}
			if *gc && *heap != "" {
				runtime.GC()
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			s.heapInuse, s.heapSys = ms.HeapInuse, ms.HeapSys
			var buf bytes.Buffer
			if *heap != "" {
				_ = pprof.Lookup("heap").WriteTo(&buf, 0)
			}
			mu.Lock()
			if s.rss > best.rss {
				best, prof = s, buf.Bytes()
			}
			mu.Unlock()
		}
	}()
	var out io.Writer = os.Stdout
	if *quiet {
		out = io.Discard
	}
	var code int
	if *runFor > 0 {
		go cli.Main(flag.Args(), os.Stdin, out, os.Stderr)
		if *driveURL != "" {
			if err := drive(strings.TrimSuffix(*driveURL, "/"), *answers, *atOnce, *firstOnly, *page); err != nil {
				fmt.Fprintln(os.Stderr, "drive:", err)
			}
		}
		if !*firstOnly && !*page {
			time.Sleep(time.Until(t0.Add(*runFor)))
		}
	} else {
		code = cli.Main(flag.Args(), os.Stdin, out, os.Stderr)
	}
	wall := time.Since(t0)
	if *cpu != "" {
		pprof.StopCPUProfile()
	}
	close(done)
	wg.Wait()
	end := readStatus()
	fmt.Printf("command: gpumem %s (exit %d, %.2f s wall)\n", strings.Join(flag.Args(), " "), code, wall.Seconds())
	fmt.Printf("peak RSS (VmHWM): %d MiB\n", end.hwm>>10)
	fmt.Printf("highest sample at %.2f s: RSS %d MiB = anonymous %d MiB + file-backed %d MiB; Go heap in use %d MiB (heap reserved %d MiB)\n",
		best.at.Seconds(), best.rss>>10, best.anon>>10, best.file>>10, best.heapInuse>>20, best.heapSys>>20)
	if *heap != "" && prof != nil {
		if err := os.WriteFile(*heap, prof, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(code)
}
