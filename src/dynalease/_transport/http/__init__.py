"""The lean path's HTTP/1.1 client: one I/O-free core and two thin drivers.

The core: :mod:`.wire` frames requests and reads answers from bytes,
:mod:`.failures` says what a failed request means (never sent, maybe applied,
cut short by the caller's limit), :mod:`.endpoint` holds the addresses (the one
that answered first), the address walk and the idle connections, and
:mod:`.sockets` opens every connection with the same options. The drivers only
move bytes and wait: :mod:`.aio` on the runtime's event loop (with
:mod:`.plain` serving plain TCP from the selector), :mod:`.blocking` in a sync
caller's thread.

Import from the modules themselves: this package's own import stays empty, so
the error mapping (:mod:`..errors`) can name the failures without loading the
drivers.
"""
