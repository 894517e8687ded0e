module github.com/gpumem/gpumem/browsertests

go 1.26.8

replace github.com/gpumem/gpumem => ../

require (
	github.com/chromedp/cdproto v0.0.0-20250724212937-08a3db8b4327
	github.com/chromedp/chromedp v0.14.2
	github.com/gpumem/gpumem v0.0.0
)

require (
	github.com/NVIDIA/go-nvml v0.13.3-0 // indirect
	github.com/chromedp/sysutil v1.1.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/gobwas/httphead v0.1.0 // indirect
	github.com/gobwas/pool v0.2.1 // indirect
	github.com/gobwas/ws v1.4.0 // indirect
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe // indirect
	github.com/klauspost/compress v1.18.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
