package release

import (
	"bytes"
	"context"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// versionPkg is where the -X flags stamp the version (internal/version).
const versionPkg = "github.com/gpumem/gpumem/internal/version"

// Ldflags returns the linker flags of a release build: no symbol tables,
// no build ID (which would otherwise differ between toolchain
// installations), and the stamp.
func (s Stamp) Ldflags() string {
	return fmt.Sprintf("-s -w -buildid= -X %[1]s.version=%[2]s -X %[1]s.commit=%[3]s -X %[1]s.date=%[4]s",
		versionPkg, s.Version, s.Commit, s.Date.UTC().Format(time.RFC3339))
}

// Build compiles ./cmd/gpumem in the module at root for t into out with
// the release flags: static (CGO_ENABLED=0), -trimpath so no local path
// is recorded, -buildvcs=false since the stamp carries the commit.
// Settings a user's environment could change (GOAMD64, GOARM64, GOFLAGS)
// are pinned to Go's defaults so that two machines build the same bytes.
func Build(ctx context.Context, root string, t Target, s Stamp, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", s.Ldflags(), "-o", out, "./cmd/gpumem")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch,
		"GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=-mod=readonly", "GOEXPERIMENT=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s: %v: %s", t, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Header is what a binary's executable header says about its platform.
type Header struct {
	OS, Arch string
	MinOS    string // macOS only: the oldest macOS it runs on, "12.0"
}

// Inspect reads the header of the executable at path: ELF (Linux),
// Mach-O (macOS) or PE (Windows).
func Inspect(path string) (Header, error) {
	if f, err := elf.Open(path); err == nil {
		defer f.Close()
		arch := map[elf.Machine]string{elf.EM_X86_64: "amd64", elf.EM_AARCH64: "arm64"}[f.Machine]
		if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX || arch == "" {
			return Header{}, fmt.Errorf("%s: ELF for %v on %v, not a Linux amd64/arm64 executable", path, f.OSABI, f.Machine)
		}
		return Header{OS: "linux", Arch: arch}, nil
	}
	if f, err := macho.Open(path); err == nil {
		defer f.Close()
		arch := map[macho.Cpu]string{macho.CpuAmd64: "amd64", macho.CpuArm64: "arm64"}[f.Cpu]
		if arch == "" {
			return Header{}, fmt.Errorf("%s: Mach-O for %v, not amd64/arm64", path, f.Cpu)
		}
		return Header{OS: "darwin", Arch: arch, MinOS: macOSMinimum(f)}, nil
	}
	if f, err := pe.Open(path); err == nil {
		defer f.Close()
		arch := map[uint16]string{pe.IMAGE_FILE_MACHINE_AMD64: "amd64", pe.IMAGE_FILE_MACHINE_ARM64: "arm64"}[f.Machine]
		if arch == "" {
			return Header{}, fmt.Errorf("%s: PE for machine %#x, not amd64/arm64", path, f.Machine)
		}
		return Header{OS: "windows", Arch: arch}, nil
	}
	return Header{}, fmt.Errorf("%s: not an ELF, Mach-O or PE executable", path)
}

// macOSMinimum reads the minimum macOS version from the LC_BUILD_VERSION
// (or older LC_VERSION_MIN_MACOSX) load command; "" when there is none.
func macOSMinimum(f *macho.File) string {
	const lcBuildVersion, lcVersionMinMacOSX, platformMacOS = 0x32, 0x24, 1
	for _, l := range f.Loads {
		raw := l.Raw()
		if len(raw) < 16 {
			continue
		}
		var v uint32
		switch f.ByteOrder.Uint32(raw) {
		case lcBuildVersion: // cmd, cmdsize, platform, minos, ...
			if f.ByteOrder.Uint32(raw[8:]) != platformMacOS {
				continue
			}
			v = f.ByteOrder.Uint32(raw[12:])
		case lcVersionMinMacOSX: // cmd, cmdsize, version, sdk
			v = f.ByteOrder.Uint32(raw[8:])
		default:
			continue
		}
		return fmt.Sprintf("%d.%d", v>>16, v>>8&0xff) // encoded as xxxx.yy.zz
	}
	return ""
}

// CheckBinary checks that the binary at path is for t, and for macOS that
// it runs on every version the wheel's tag promises.
func CheckBinary(path string, t Target) (Header, error) {
	h, err := Inspect(path)
	if err != nil {
		return h, err
	}
	if h.OS != t.OS || h.Arch != t.Arch {
		return h, fmt.Errorf("%s: built for %s/%s, want %s", path, h.OS, h.Arch, t)
	}
	if t.OS == "darwin" {
		if err := macOSTagCovers(h.MinOS, t.Wheel); err != nil {
			return h, fmt.Errorf("%s: %v", path, err)
		}
	}
	return h, nil
}

// macOSTagCovers checks that a binary needing macOS minOS ("12.0") runs on
// every macOS the wheel tag ("macosx_12_0_arm64") lets pip install it on.
func macOSTagCovers(minOS, tag string) error {
	var major, minor, tmaj, tmin int
	if _, err := fmt.Sscanf(minOS, "%d.%d", &major, &minor); err != nil {
		return fmt.Errorf("no minimum macOS version in the Mach-O header")
	}
	if _, err := fmt.Sscanf(strings.TrimPrefix(tag, "macosx_"), "%d_%d_", &tmaj, &tmin); err != nil {
		return fmt.Errorf("%q is not a macOS wheel tag", tag)
	}
	if major > tmaj || major == tmaj && minor > tmin {
		return fmt.Errorf("needs macOS %s, but the wheel tag %s lets pip install it on %d.%d", minOS, tag, tmaj, tmin)
	}
	return nil
}
