package release

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"io"
	"io/fs"
	"strings"
	"time"
)

// File is one member of an archive or wheel. Members are written in the
// order given, each with the same mtime, owner root and Mode, so the
// archive's bytes depend on nothing but the files.
type File struct {
	Name string // slash-separated; a trailing slash makes a directory
	Mode fs.FileMode
	Data []byte
}

// WriteTarGz writes files as a gzip-compressed tar archive.
func WriteTarGz(w io.Writer, files []File, mtime time.Time) error {
	gz, err := gzip.NewWriterLevel(w, gzip.BestCompression) // header left empty: no name, no mtime
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{
			Name:     f.Name,
			Mode:     int64(f.Mode.Perm()),
			Size:     int64(len(f.Data)),
			ModTime:  mtime.UTC(),
			Typeflag: tar.TypeReg,
			Uname:    "root",
			Gname:    "root",
			Format:   tar.FormatUSTAR,
		}
		if strings.HasSuffix(f.Name, "/") {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// WriteZip writes files as a deflated zip archive whose entries carry Unix
// modes in their external attributes (so unzip and pip keep the
// executable bit).
func WriteZip(w io.Writer, files []File, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime.UTC()}
		mode := f.Mode.Perm()
		if strings.HasSuffix(f.Name, "/") {
			h.Method = zip.Store
			mode |= fs.ModeDir
		}
		h.SetMode(mode)
		fw, err := zw.CreateHeader(h)
		if err != nil {
			return err
		}
		if _, err := fw.Write(f.Data); err != nil {
			return err
		}
	}
	return zw.Close()
}
