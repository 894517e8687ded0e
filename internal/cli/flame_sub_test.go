package cli

import (
	"strings"
	"testing"
)

// TestFlameMemorySubtitle: the memory flamegraph of every device says the
// bytes are all devices' together, not "in every device".
func TestFlameMemorySubtitle(t *testing.T) {
	code, out, stderr := runCLI("flame", "memory", "--demo")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "reserved on all devices together") || strings.Contains(out, "every device") {
		t.Errorf("subtitle wrong")
	}
	code, out, _ = runCLI("flame", "memory", "--device", "0", "--demo")
	if code != 0 || !strings.Contains(out, "reserved on cuda:0") {
		t.Errorf("one device: exit %d", code)
	}
}
