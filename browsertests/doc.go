// Package browsertests drives gpumem's web viewer in headless Chromium.
package browsertests
