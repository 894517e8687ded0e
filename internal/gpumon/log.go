package gpumon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// The JSONL log has one object per line, told apart by "type":
//
//	start   one per run: backend, sampling and report periods, devices
//	sample  one per device per sample: used/free/total bytes, util, processes
//	report  one per device per report period: peak since the last report, min, mean
//	alert   a device crossed the --alert threshold
//
// Times are RFC 3339 with nanoseconds; memory is in bytes.

// StartRecord opens a run in the log.
type StartRecord struct {
	Type       string       `json:"type"`
	Time       time.Time    `json:"time"`
	Backend    string       `json:"backend"`
	IntervalMS int64        `json:"interval_ms"`
	ReportMS   int64        `json:"report_ms"`
	Devices    []DeviceInfo `json:"devices"`
}

// DeviceInfo is a device's identity in the start record.
type DeviceInfo struct {
	GPU   int    `json:"gpu"`
	MIG   *int   `json:"mig,omitempty"`
	UUID  string `json:"uuid,omitempty"`
	Name  string `json:"name,omitempty"`
	Total uint64 `json:"total"`
}

// RecordHead is what sample, report and alert records start with: the
// type, the time and the device.
type RecordHead struct {
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	GPU  int       `json:"gpu"`
	MIG  *int      `json:"mig,omitempty"` // the GPU instance of a MIG device
	UUID string    `json:"uuid,omitempty"`
}

func newHead(typ string, t time.Time, d Device) RecordHead {
	return RecordHead{Type: typ, Time: t, GPU: d.Index, MIG: migPtr(d.MIG), UUID: d.UUID}
}

// SampleRecord is one device at one sample.
type SampleRecord struct {
	RecordHead
	Used  uint64       `json:"used"`
	Free  uint64       `json:"free"`
	Total uint64       `json:"total"`
	Util  *int         `json:"util,omitempty"` // absent where the driver gives none
	Procs []ProcRecord `json:"procs,omitempty"`
}

// ProcRecord is a process in a sample (Used) or a report (Peak); -1 means
// the driver did not give the process's memory.
type ProcRecord struct {
	PID  int    `json:"pid"`
	Cmd  string `json:"cmd"`
	Used *int64 `json:"used,omitempty"`
	Peak *int64 `json:"peak,omitempty"`
}

// ReportRecord is one device's Interval; Time is the interval's end.
type ReportRecord struct {
	RecordHead
	Start    time.Time    `json:"start"`
	Total    uint64       `json:"total"`
	Samples  int          `json:"samples"`
	Peak     uint64       `json:"peak"`
	PeakTime time.Time    `json:"peak_time"`
	Min      uint64       `json:"min"`
	Mean     uint64       `json:"mean"`
	Procs    []ProcRecord `json:"procs,omitempty"`
}

// AlertRecord says a device passed the --alert threshold.
type AlertRecord struct {
	RecordHead
	Used      uint64  `json:"used"`
	Total     uint64  `json:"total"`
	Percent   float64 `json:"percent"`
	Threshold float64 `json:"threshold"`
}

func migPtr(mig int) *int {
	if mig < 0 {
		return nil
	}
	return &mig
}

func migOf(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// NewSampleRecords turns a sample into its records, one per device with
// memory figures.
func NewSampleRecords(s Sample) []SampleRecord {
	var out []SampleRecord
	for _, d := range s.Devices {
		if !d.MemKnown {
			continue
		}
		r := SampleRecord{RecordHead: newHead("sample", s.Time, d), Used: d.Used, Free: d.Free, Total: d.Total}
		if d.Util >= 0 {
			u := d.Util
			r.Util = &u
		}
		k := DeviceKey(d)
		for _, p := range s.Procs {
			if procDeviceKey(s.Devices, p) == k {
				used := p.Used
				r.Procs = append(r.Procs, ProcRecord{PID: p.PID, Cmd: p.Command, Used: &used})
			}
		}
		out = append(out, r)
	}
	return out
}

// NewReportRecord turns an Interval into its record.
func NewReportRecord(iv Interval) ReportRecord {
	r := ReportRecord{RecordHead: newHead("report", iv.End, iv.Device), Start: iv.Start, Total: iv.Device.Total, Samples: iv.Samples, Peak: iv.Peak, PeakTime: iv.PeakTime, Min: iv.Min, Mean: iv.Mean}
	for _, p := range iv.Procs {
		peak := p.Peak
		r.Procs = append(r.Procs, ProcRecord{PID: p.PID, Cmd: p.Command, Peak: &peak})
	}
	return r
}

// Interval turns a report record back into an Interval.
func (r ReportRecord) Interval() Interval {
	iv := Interval{Device: Device{Index: r.GPU, MIG: migOf(r.MIG), UUID: r.UUID, Total: r.Total, MemKnown: true},
		Start: r.Start, End: r.Time, Samples: r.Samples, Peak: r.Peak, PeakTime: r.PeakTime, Min: r.Min, Mean: r.Mean}
	for _, p := range r.Procs {
		pp := ProcPeak{PID: p.PID, Command: p.Cmd, Peak: -1}
		if p.Peak != nil {
			pp.Peak = *p.Peak
		}
		iv.Procs = append(iv.Procs, pp)
	}
	return iv
}

// Device turns a sample record back into a Device.
func (r SampleRecord) Device() Device {
	d := Device{Index: r.GPU, MIG: migOf(r.MIG), UUID: r.UUID, Used: r.Used, Free: r.Free, Total: r.Total, Util: -1, MemKnown: true}
	if r.Util != nil {
		d.Util = *r.Util
	}
	return d
}

// LogWriter appends records to a JSONL file. Samples are buffered; a
// report or an alert flushes and fsyncs, so a crash loses at most the
// samples of one report period.
type LogWriter struct {
	f  *os.File
	bw *bufio.Writer
}

// wrap names the log in a write error.
func (w *LogWriter) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--log %s: %w", w.f.Name(), err)
}

// CreateLog opens path for appending (a log may hold several runs, each
// opened by a start record), creating it if needed.
func CreateLog(path string) (*LogWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &LogWriter{f: f, bw: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (w *LogWriter) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return w.wrap(err)
	}
	b = append(b, '\n')
	_, err = w.bw.Write(b)
	return w.wrap(err)
}

// Sync flushes buffered records and fsyncs the file.
func (w *LogWriter) Sync() error {
	if err := w.bw.Flush(); err != nil {
		return w.wrap(err)
	}
	return w.wrap(w.f.Sync())
}

// Start writes the run's start record and syncs.
func (w *LogWriter) Start(r StartRecord) error {
	r.Type = "start"
	if err := w.write(r); err != nil {
		return err
	}
	return w.Sync()
}

// Sample writes a sample's records (buffered).
func (w *LogWriter) Sample(s Sample) error {
	for _, r := range NewSampleRecords(s) {
		if err := w.write(r); err != nil {
			return err
		}
	}
	return nil
}

// Report writes one record per interval and syncs.
func (w *LogWriter) Report(ivs []Interval) error {
	for _, iv := range ivs {
		if err := w.write(NewReportRecord(iv)); err != nil {
			return err
		}
	}
	return w.Sync()
}

// Alert writes an alert record and syncs.
func (w *LogWriter) Alert(a AlertRecord) error {
	a.Type = "alert"
	if err := w.write(a); err != nil {
		return err
	}
	return w.Sync()
}

// Close syncs and closes the file.
func (w *LogWriter) Close() error {
	err := w.Sync()
	if cerr := w.f.Close(); err == nil {
		err = w.wrap(cerr)
	}
	return err
}

// Log is a JSONL log read back.
type Log struct {
	Starts  []StartRecord
	Samples []SampleRecord
	Reports []ReportRecord
	Alerts  []AlertRecord
	// TruncatedTail is set when the last line had no newline and did not
	// parse: the writer died mid-line, which is expected after a crash.
	TruncatedTail bool
}

// maxLogLine bounds one line; a sample with thousands of processes is
// still far below it.
const maxLogLine = 4 << 20

// ReadLog reads a JSONL log. name is used in errors, which give the line
// and byte offset of the first bad record.
func ReadLog(r io.Reader, name string) (*Log, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	lg := &Log{}
	var off int64
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s: line %d (byte %d): %v", name, lineNo, off, err)
		}
		if len(line) == 0 && err == io.EOF {
			return lg, nil
		}
		start := off
		off += int64(len(line))
		complete := bytes.HasSuffix(line, []byte{'\n'})
		if perr := lg.add(bytes.TrimSpace(line)); perr != nil {
			if !complete && err == io.EOF {
				lg.TruncatedTail = true
				return lg, nil
			}
			return nil, fmt.Errorf("%s: line %d (byte %d): %v", name, lineNo, start, perr)
		}
		if err == io.EOF {
			return lg, nil
		}
	}
}

// readLine reads up to and including '\n', refusing lines over maxLogLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		buf = append(buf, chunk...)
		if len(buf) > maxLogLine {
			return nil, fmt.Errorf("line longer than %d bytes; not a gpumem watch log?", maxLogLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

func (lg *Log) add(line []byte) error {
	if len(line) == 0 {
		return nil
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	var err error
	switch head.Type {
	case "start":
		err = appendRecord(line, &lg.Starts)
	case "sample":
		err = appendRecord(line, &lg.Samples)
	case "report":
		err = appendRecord(line, &lg.Reports)
	case "alert":
		err = appendRecord(line, &lg.Alerts)
	default:
		return fmt.Errorf("unknown record type %q; not a gpumem watch log?", head.Type)
	}
	if err != nil {
		return fmt.Errorf("bad %s record: %v", head.Type, err)
	}
	return nil
}

func appendRecord[T any](line []byte, dst *[]T) error {
	var r T
	if err := json.Unmarshal(line, &r); err != nil {
		return err
	}
	*dst = append(*dst, r)
	return nil
}
