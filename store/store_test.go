package store_test

import (
	"testing"

	"github.com/nomoshq/nomos/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
