"""The ``$JS.API`` request/reply API: the router (dispatch, envelope, counters), request decoding,
the stream, consumer and direct-get handlers, and the request/response documents."""
