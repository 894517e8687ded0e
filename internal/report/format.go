// Package report renders snapshots as the text reports gpumem prints.
package report
