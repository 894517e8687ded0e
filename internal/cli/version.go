package cli

import (
	"fmt"

	"github.com/gpumem/gpumem/internal/help"
	"github.com/gpumem/gpumem/internal/report"
	"github.com/gpumem/gpumem/internal/version"
)

func init() {
	Register(&Command{
		Name:    "version",
		Summary: "which gpumem this is: version, commit, build date, Go version (also --version)",
		Run:     runVersion,
	})
}

func runVersion(env *Env, args []string) error {
	fs := newFlagSet(env, "version", "[--json]", help.About("version"))
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
		return report.WriteJSON(env.Stdout, in)
	}
	_, err = fmt.Fprint(env.Stdout, in.String())
	return err
}
