// Package demo embeds a small synthetic training-run snapshot so that every
// view can be tried without a file of one's own (gpumem --demo).
//
// The snapshot is a 4-layer transformer (d_model 1024, 16 heads, seq 512,
// batch 8, vocab 32000, fp32) trained for 3 steps with AdamW, as
// internal/synth generates it through the allocator model. Regenerate it
// with `go generate ./internal/demo`; a test checks that this reproduces
// the committed bytes.
package demo

import (
	_ "embed"

	"github.com/gpumem/gpumem/internal/synth"
	"github.com/gpumem/gpumem/snapshot"
)

//go:generate go run ./gen

//go:embed demo.pickle
var data []byte

// Workload is the run the demo snapshot records.
var Workload = synth.Workload{
	Model: "transformer", Layers: 4, DModel: 1024, Heads: 16, Seq: 512, Batch: 8, Vocab: 32000,
	Steps: 3, DType: synth.FP32, Seed: 1,
}

// Options are the allocator settings of the demo run (PyTorch's defaults on
// an 80 GiB device).
var Options = synth.Options{Capacity: 80 << 30}

// Name is the Source.Name of the decoded demo snapshot.
const Name = "demo"

// Bytes returns a copy of the embedded snapshot file (a protocol-4 pickle).
func Bytes() []byte {
	return append([]byte(nil), data...)
}

// Open decodes the embedded snapshot.
func Open() (*snapshot.Snapshot, error) {
	return snapshot.DecodeBytes(data, Name, nil)
}
