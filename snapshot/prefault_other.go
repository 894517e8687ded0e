//go:build !linux

package snapshot

// prefaulter does nothing where pages cannot be faulted in ahead.
type prefaulter struct{}

func startPrefault[T any](s []T) *prefaulter { return nil }

func (p *prefaulter) advance(bytes int) {}

func (p *prefaulter) stop() {}
