package snapshot

import (
	"reflect"
	"testing"
)

func TestAnnotationSpans(t *testing.T) {
	s := &Snapshot{Annotations: []Annotation{
		{Device: 0, TimeUS: 10, Name: "ProfilerStep#1", Stage: "START"},
		{Device: 1, TimeUS: 11, Name: "ProfilerStep#1", Stage: "START"},
		{Device: 0, TimeUS: 12, Name: "Optimizer.step#AdamW.step", Stage: "START"},
		{Device: 0, TimeUS: 15, Name: "Optimizer.step#AdamW.step", Stage: "END"},
		{Device: 0, TimeUS: 20, Name: "ProfilerStep#1", Stage: "END"},
		{Device: 0, TimeUS: 21, Name: "ProfilerStep#2", Stage: "END"},   // never started
		{Device: 0, TimeUS: 22, Name: "ProfilerStep#3", Stage: "START"}, // never ended
		{Device: 1, TimeUS: 30, Name: "ProfilerStep#1", Stage: "END"},
	}}
	for _, c := range []struct {
		device int
		prefix string
		want   []AnnotationSpan
	}{
		{0, "ProfilerStep#", []AnnotationSpan{{"ProfilerStep#1", 10, 20}}},
		{1, "ProfilerStep#", []AnnotationSpan{{"ProfilerStep#1", 11, 30}}},
		{0, "Optimizer.step#", []AnnotationSpan{{"Optimizer.step#AdamW.step", 12, 15}}},
		{0, "", []AnnotationSpan{{"Optimizer.step#AdamW.step", 12, 15}, {"ProfilerStep#1", 10, 20}}},
		{2, "", nil},
	} {
		if got := s.AnnotationSpans(c.device, c.prefix); !reflect.DeepEqual(got, c.want) {
			t.Errorf("AnnotationSpans(%d, %q) = %v, want %v", c.device, c.prefix, got, c.want)
		}
	}
}
