"""``python -m sklearn_kernelpool``: the attention-pooling demonstration."""

from ._main import main

raise SystemExit(main())
