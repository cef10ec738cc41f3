package signature_test

import (
	"errors"
	"fmt"

	"github.com/evfwd/evfwd/pkg/signature"
)

func Example() {
	secret, body := []byte("s3cret"), []byte(`{"type":"track"}`)
	sig := signature.Sign(secret, body)
	fmt.Println(signature.Verify(secret, body, sig))
	fmt.Println(errors.Is(signature.Verify(secret, append(body, '\n'), sig), signature.ErrInvalidSignature))
	// Output:
	// <nil>
	// true
}
