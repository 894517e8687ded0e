package main

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// procSnap maps "pid/tid name type" to CPU ticks for chromium threads.
func procSnap() map[string]int64 {
	m := map[string]int64{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		if open := strings.IndexByte(string(b), '('); open < 0 || !strings.HasPrefix(string(b[open+1:]), "chrom") && !strings.HasPrefix(string(b[open+1:]), "gpumem") {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		typ := "browser"
		for _, a := range strings.Split(string(cl), "\x00") {
			if strings.HasPrefix(a, "--type=") {
				typ = a[7:]
			}
			if strings.HasPrefix(a, "--utility-sub-type=") {
				typ += ":" + a[19:]
			}
		}
		ts, _ := os.ReadDir("/proc/" + d.Name() + "/task")
		for _, t := range ts {
			tb, err := os.ReadFile("/proc/" + d.Name() + "/task/" + t.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(tb)
			o, c := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			name := s[o+1 : c]
			if f := strings.Fields(s[c+2:]); len(f) > 16 {
				name += " nice" + f[16]
			}
			m[typ+" "+d.Name()+" "+name] += int64(statTicks(tb))
		}
	}
	return m
}

func procDiff(a, b map[string]int64) {
	type kv struct {
		k string
		v int64
	}
	var l []kv
	for k, v := range b {
		if d := v - a[k]; d > 0 {
			l = append(l, kv{k, d})
		}
	}
	sort.Slice(l, func(i, j int) bool { return l[i].v > l[j].v })
	for _, x := range l {
		fmt.Fprintf(os.Stderr, "PROC %-60s %v\n", x.k, x.v/1e6)
	}
}
