// GraphiQL on this server's /graphql, opening on the README's first read.
// Headers typed in the Headers editor (an Authorization bearer token, say) go
// with every request and stay in the page: GraphiQL keeps them in the
// browser's local storage only once the user turns on "Persist headers" in
// its settings.
// Queries and mutations are POSTed; subscriptions run over a WebSocket to the
// same /graphql (graphql-transport-ws, through graphql-ws's client), whose
// connection_init carries the Authorization.
(function () {
  // The example is the README walkthrough's first read, after comments on
  // what to run before it (TestPlaygroundOpensOnTheReadmesRead checks it).
  var example = `# listgate: reads user u1's reading history, newest first.
# On a fresh server, first run these in a new tab (+):
#
#   mutation { createListFeature(input: {entityType: "user",
#     name: "reading_history", valueType: STRING,
#     ttlSeconds: 315360000, description: "stories the user read",
#     live: true}) { key } }
#   mutation { addListItems(list: {entityType: "user",
#     entityId: "u1", feature: "reading_history"},
#     items: [{value: "story1"}, {value: "story2"}]) { added } }
#
# Next page: pass the endCursor as list's after: argument. To send a
# token, add {"Authorization": "Bearer …"} under Headers.
{
  entity(type: "user", entityId: "u1") {
    id
    list(feature: "reading_history", limit: 2) {
      items { value timestamp expiresAt cursor }
      hasMore
      endCursor
    }
  }
}
`;
  var storage = headersKeptOnlyIfAsked();
  var endpoint = new URL('/graphql', window.location.href);
  var http = GraphiQL.createFetcher({ url: endpoint.href });
  var socketURL = new URL(endpoint.href);
  socketURL.protocol = endpoint.protocol === 'https:' ? 'wss:' : 'ws:';

  // The gateway authenticates a WebSocket once, by its connection_init, so
  // a subscription run after the Authorization changed needs a connection
  // of its own: one client per Authorization, the latest kept. A client is
  // lazy: it opens its socket for its first subscription and closes it
  // after its last, so one left behind holds nothing once its
  // subscriptions end.
  var socket = { client: null, authorization: null };
  function socketClient(headers) {
    var authorization = authorizationOf(headers);
    if (socket.client === null || socket.authorization !== authorization) {
      socket = {
        authorization: authorization,
        client: graphqlWs.createClient({
          url: socketURL.href,
          connectionParams: authorization === null ? {} : { Authorization: authorization },
          // A subscription whose socket is lost ends with an error shown in
          // the response pane; started again unseen, it would miss the items
          // added meanwhile (and a refused token would only be retried).
          retryAttempts: 0
        })
      };
    }
    return socket.client;
  }

  // The Authorization among the header editor's headers, whatever its case.
  function authorizationOf(headers) {
    for (var name in headers || {}) {
      if (name.toLowerCase() === 'authorization') {
        return String(headers[name]);
      }
    }
    return null;
  }

  // Whether GraphiQL runs a subscription: the operation of that name (or
  // the anonymous one) in the editor's document, as GraphiQL's own fetcher
  // decides.
  function isSubscription(params, opts) {
    var doc = opts && opts.documentAST;
    var name = params.operationName || undefined;
    return !!doc && doc.definitions.some(function (def) {
      return def.kind === 'OperationDefinition' && def.operation === 'subscription' &&
        (def.name ? def.name.value : undefined) === name;
    });
  }

  // An observable GraphiQL shows each result of, and stops with its stop
  // button (graphql-ws then sends complete).
  function subscription(client, params) {
    return {
      subscribe: function (sink) {
        var unsubscribe = client.subscribe(params, {
          next: function (result) { sink.next(result); },
          error: function (err) { sink.error(socketError(err)); },
          complete: function () { sink.complete(); }
        });
        return { unsubscribe: unsubscribe };
      }
    };
  }

  // What graphql-ws reports, in the shape of GraphQL errors: the
  // operation's errors as they are, a closed socket by its code and reason.
  function socketError(err) {
    if (Array.isArray(err)) {
      return err;
    }
    if (typeof CloseEvent !== 'undefined' && err instanceof CloseEvent) {
      var closed = err.code + (err.reason ? ' ' + err.reason : '');
      if (err.code === 4403) {
        return [{ message: 'the gateway refused the Authorization under Headers (WebSocket closed: ' + closed + ')' }];
      }
      return [{ message: 'the WebSocket to ' + socketURL.href + ' closed: ' + closed }];
    }
    if (err instanceof Error) {
      return [{ message: err.message }];
    }
    return [{ message: 'the WebSocket to ' + socketURL.href + ' failed' }];
  }

  // GraphiQL's storage: the browser's local storage under graphiql:*,
  // where headers are kept only while "Persist headers" is on. GraphiQL
  // 3.8 already leaves them out of its header editor's and tabs' entries,
  // but its history (and favourites) keeps every run's headers; those are
  // dropped here. Headers kept before, by a page that kept them or while
  // the setting was on, are dropped on load and when it is turned off.
  function headersKeptOnlyIfAsked() {
    var history = { 'graphiql:queries': 'queries', 'graphiql:favorites': 'favorites' };
    var lists = Object.assign({ 'graphiql:tabState': 'tabs' }, history);
    function persisting() {
      return localStorage.getItem('graphiql:shouldPersistHeaders') === 'true';
    }
    // value (the JSON of an object holding a list under field) without
    // the headers of the list's entries.
    function withoutHeaders(value, field) {
      try {
        var stored = JSON.parse(value);
        (stored[field] || []).forEach(function (entry) { entry.headers = null; });
        return JSON.stringify(stored);
      } catch (e) {
        return value;
      }
    }
    function forgetHeaders() {
      localStorage.removeItem('graphiql:headers');
      Object.keys(lists).forEach(function (key) {
        var value = localStorage.getItem(key);
        if (value !== null) {
          localStorage.setItem(key, withoutHeaders(value, lists[key]));
        }
      });
    }
    function keys() {
      return Object.keys(localStorage).filter(function (key) { return key.indexOf('graphiql:') === 0; });
    }
    if (!persisting()) {
      forgetHeaders();
    }
    return {
      getItem: function (key) { return localStorage.getItem(key); },
      setItem: function (key, value) {
        if (key in history && !persisting()) {
          value = withoutHeaders(value, history[key]);
        }
        localStorage.setItem(key, value);
        if (key === 'graphiql:shouldPersistHeaders' && value !== 'true') {
          forgetHeaders();
        }
      },
      removeItem: function (key) { localStorage.removeItem(key); },
      get length() { return keys().length; },
      clear: function () { keys().forEach(function (key) { localStorage.removeItem(key); }); }
    };
  }

  function fetcher(params, opts) {
    if (isSubscription(params, opts)) {
      return subscription(socketClient(opts.headers), params);
    }
    return http(params, opts);
  }
  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: example,
      storage: storage,
      defaultEditorToolsVisibility: 'headers'
    })
  );
})();
