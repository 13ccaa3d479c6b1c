package service

import "github.com/axhq/ax/service/signing"

// GenerateSecret returns a new random signing secret
// (signing.GenerateSecret).
func GenerateSecret() (string, error) { return signing.GenerateSecret() }

// ParseSecret returns the key bytes of a signing secret
// (signing.ParseSecret); its error wraps signing.ErrInvalidSecret.
func ParseSecret(s string) ([]byte, error) { return signing.ParseSecret(s) }
