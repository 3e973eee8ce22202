"""Reading page by page: where a read resumes is opaque to everything but the adapter that read it."""

from __future__ import annotations

from typing import NewType

# A token the storage adapter makes from (and turns back into) its own resume key. Services store it (a
# redrive's progress), wrap it (an API cursor) and hand it back, but never look inside.
Position = NewType("Position", str)
