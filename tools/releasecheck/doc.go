// Package releasecheck holds tests only: they read .goreleaser.yaml and check that every
// package format (archive, Homebrew cask, deb, rpm, apk) ships cfp's man pages and its bash, zsh
// and fish completions, where each format's users look for them.
package releasecheck
