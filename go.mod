module github.com/gpumem/gpumem

go 1.26.8

require (
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	github.com/klauspost/compress v1.18.0
	golang.org/x/term v0.47.0
)

require golang.org/x/sys v0.49.0 // indirect
