package cli

import (
	"encoding/json"
	"fmt"

	"github.com/gpumem/gpumem/internal/version"
)

func init() {
	Register(&Command{
		Name:    "version",
		Summary: "which gpumem this is: version, commit, build date, Go version (also --version)",
		Run:     runVersion,
	})
}

const versionAbout = `
Prints the release version, the commit it was built from (+dirty when the
tree had uncommitted changes), the commit's date, the Go toolchain and the
platform. Release builds (scripts/release.sh) stamp these in; a binary from
"go install" or "go build" shows what the Go toolchain recorded, and
"devel"/"unknown" for what it did not. --json prints the same as JSON.`

func runVersion(env *Env, args []string) error {
	fs := newFlagSet(env, "version", "[--json]", versionAbout)
	asJSON := fs.Bool("json", false, "print JSON")
	rest, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usageError(fs, env.Stderr, fmt.Sprintf("unexpected argument %q", rest[0]))
	}
	in := version.Get()
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	_, err = fmt.Fprint(env.Stdout, in.String())
	return err
}
