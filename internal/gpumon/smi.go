package gpumon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The nvidia-smi backend is the default (NVML needs -tags nvml). It
// runs one long-lived "nvidia-smi --query-gpu=… -lms N" and parses its
// stream, and polls "--query-compute-apps=…" (one short run at most every
// second: process lists change slowly and each run costs tens of ms).

// SMIGPUFields and SMIAppFields are the columns asked of nvidia-smi, in
// the order the parsers expect. process_name is last because a path may
// hold commas.
const (
	SMIGPUFields = "index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu"
	SMIAppFields = "gpu_uuid,pid,used_memory,process_name"
)

const mib = 1 << 20

// smiUnknown reports nvidia-smi's spellings of "no value".
func smiUnknown(f string) bool {
	return strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") // [N/A], [Not Supported], [Insufficient Permissions], [Unknown Error]
}

func smiFields(line string, n int) ([]string, error) {
	fs := strings.SplitN(line, ",", n)
	if len(fs) != n {
		return nil, fmt.Errorf("want %d comma-separated fields, got %d", n, len(fs))
	}
	for i := range fs {
		fs[i] = strings.TrimSpace(fs[i])
	}
	return fs, nil
}

func smiMiB(f, what string) (uint64, bool, error) {
	if smiUnknown(f) {
		return 0, false, nil
	}
	f = strings.TrimSuffix(f, " MiB") // the same query without nounits
	v, err := strconv.ParseUint(f, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s %q is not a number of MiB", what, f)
	}
	return v * mib, true, nil
}

// ParseSMIGPULine parses one line of
// "nvidia-smi --query-gpu=SMIGPUFields --format=csv,noheader,nounits".
// A GPU in MIG mode gives [N/A] utilisation (and on some drivers [N/A]
// memory): Util is -1, MemKnown false.
func ParseSMIGPULine(line string) (Device, error) {
	fs, err := smiFields(line, 8)
	if err != nil {
		return Device{}, err
	}
	d := Device{UUID: fs[1], Name: fs[2], PCIBusID: fs[3], MIG: -1, Util: -1}
	if d.Index, err = strconv.Atoi(fs[0]); err != nil {
		return Device{}, fmt.Errorf("index %q is not a number", fs[0])
	}
	var ok [3]bool
	if d.Total, ok[0], err = smiMiB(fs[4], "memory.total"); err != nil {
		return Device{}, err
	}
	if d.Used, ok[1], err = smiMiB(fs[5], "memory.used"); err != nil {
		return Device{}, err
	}
	if d.Free, ok[2], err = smiMiB(fs[6], "memory.free"); err != nil {
		return Device{}, err
	}
	d.MemKnown = ok[0] && ok[1]
	if d.MemKnown && !ok[2] && d.Total >= d.Used {
		d.Free = d.Total - d.Used
	}
	if !smiUnknown(fs[7]) {
		u, err := strconv.Atoi(strings.TrimSuffix(fs[7], " %"))
		if err != nil || u < 0 || u > 100 {
			return Device{}, fmt.Errorf("utilization.gpu %q is not a percentage", fs[7])
		}
		d.Util = u
	}
	return d, nil
}

// ParseSMIAppLine parses one line of
// "nvidia-smi --query-compute-apps=SMIAppFields --format=csv,noheader,nounits".
// The device index is left for the caller to fill in from the UUID.
func ParseSMIAppLine(line string) (Process, error) {
	fs, err := smiFields(line, 4)
	if err != nil {
		return Process{}, err
	}
	p := Process{UUID: fs[0], Command: fs[3], Device: -1}
	if p.PID, err = strconv.Atoi(fs[1]); err != nil {
		return Process{}, fmt.Errorf("pid %q is not a number", fs[1])
	}
	used, known, err := smiMiB(fs[2], "used_memory")
	if err != nil {
		return Process{}, err
	}
	p.Used = -1
	if known {
		p.Used = int64(used)
	}
	return p, nil
}

// SMI is the nvidia-smi backend.
type SMI struct {
	bin      string
	interval time.Duration
	ndev     int

	cancel  context.CancelFunc
	cmd     *exec.Cmd
	samples chan smiResult
	done    chan struct{}

	mu       sync.Mutex
	procs    []Process
	procsErr error
	uuidIdx  map[string]int
	lastApps time.Time
}

type smiResult struct {
	s   Sample
	err error
}

// OpenSMI checks that bin (normally "nvidia-smi") answers and starts its
// sampling stream every interval.
func OpenSMI(bin string, interval time.Duration) (*SMI, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %v", err)
	}
	// One query first: it fails fast and with the driver's message when
	// nvidia-smi is installed but no driver answers, and gives the count.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	out, err := exec.CommandContext(ctx, path, "--query-gpu="+SMIGPUFields, "--format=csv,noheader,nounits").Output()
	cancel()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %v: %s", err, firstLine(out))
	}
	devs, err := parseSMIGPUs(out)
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi: %v", err)
	}
	if len(devs) == 0 {
		return nil, errors.New("nvidia-smi: no GPUs listed")
	}
	s := &SMI{bin: path, interval: interval, ndev: len(devs), samples: make(chan smiResult, 4), done: make(chan struct{}), uuidIdx: map[string]int{}}
	for _, d := range devs {
		s.uuidIdx[d.UUID] = d.Index
	}
	sctx, scancel := context.WithCancel(context.Background())
	s.cancel = scancel
	ms := interval.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	s.cmd = exec.CommandContext(sctx, path, "--query-gpu="+SMIGPUFields, "--format=csv,noheader,nounits", "-lms", strconv.FormatInt(ms, 10))
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		scancel()
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		scancel()
		return nil, fmt.Errorf("nvidia-smi: %v", err)
	}
	go s.read(stdout)
	s.pollApps()
	return s, nil
}

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(bytes.TrimSpace(b), []byte{'\n'})
	return string(line)
}

func parseSMIGPUs(out []byte) ([]Device, error) {
	var devs []Device
	for _, line := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		d, err := ParseSMIGPULine(line)
		if err != nil {
			return nil, fmt.Errorf("%v in %q", err, line)
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// read groups the stream's lines into samples: one line per GPU per loop,
// a group complete after ndev lines or when the index goes back.
func (s *SMI) read(r io.Reader) {
	defer close(s.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var cur []Device
	var at time.Time
	flush := func() {
		if len(cur) > 0 {
			s.samples <- smiResult{s: Sample{Time: at, Devices: cur}}
			cur = nil
		}
	}
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		d, err := ParseSMIGPULine(line)
		if err != nil {
			s.samples <- smiResult{err: fmt.Errorf("nvidia-smi: %v in %q", err, line)}
			return
		}
		if len(cur) > 0 && d.Index <= cur[len(cur)-1].Index {
			flush()
		}
		if len(cur) == 0 {
			at = time.Now()
		}
		cur = append(cur, d)
		if len(cur) == s.ndev {
			flush()
		}
	}
	flush()
	err := sc.Err()
	if err == nil {
		err = errors.New("nvidia-smi stopped")
	}
	s.samples <- smiResult{err: fmt.Errorf("nvidia-smi: %v", err)}
}

// pollApps runs the compute-apps query and keeps its answer.
func (s *SMI) pollApps() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, s.bin, "--query-compute-apps="+SMIAppFields, "--format=csv,noheader,nounits").Output()
	var procs []Process
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			p, perr := ParseSMIAppLine(line)
			if perr != nil {
				err = fmt.Errorf("%v in %q", perr, line)
				break
			}
			procs = append(procs, p)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastApps = time.Now()
	if err != nil {
		s.procsErr = err
		return
	}
	for i := range procs {
		if idx, ok := s.uuidIdx[procs[i].UUID]; ok {
			procs[i].Device = idx
		}
		procs[i].Command = processCommand(procs[i].PID, procs[i].Command)
	}
	s.procs, s.procsErr = procs, nil
}

// Name implements Backend.
func (s *SMI) Name() string { return "nvidia-smi" }

// Sample implements Backend: the stream's next sample, with the latest
// process list.
func (s *SMI) Sample() (Sample, error) {
	r, ok := <-s.samples
	if !ok {
		return Sample{}, errors.New("nvidia-smi: closed")
	}
	if r.err != nil {
		return Sample{}, r.err
	}
	s.mu.Lock()
	r.s.Procs = append([]Process(nil), s.procs...)
	if time.Since(s.lastApps) >= max(s.interval, time.Second) {
		s.lastApps = time.Now() // one poll in flight at a time
		go s.pollApps()
	}
	s.mu.Unlock()
	return r.s, nil
}

// Close stops nvidia-smi.
func (s *SMI) Close() error {
	s.cancel()
	go func() {
		for range s.samples {
		}
	}()
	<-s.done
	_ = s.cmd.Wait()
	close(s.samples)
	return nil
}

// processCommand is the process's command line from /proc when readable
// (Linux, same PID namespace), else what the driver called it.
func processCommand(pid int, fallback string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || len(b) == 0 {
		return fallback
	}
	b = bytes.TrimRight(b, "\x00")
	cmd := strings.ReplaceAll(string(b), "\x00", " ")
	if len(cmd) > 200 {
		cmd = cmd[:200]
	}
	return cmd
}
