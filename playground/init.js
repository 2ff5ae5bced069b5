// GraphiQL on this server's /graphql, opening on an example. Headers typed in
// the Headers editor (an Authorization bearer token, say) go with every request.
(function () {
  var example = [
    '# listgate: reads user u1\'s reading history, newest first.',
    '# On a fresh server, first run these in a new tab (+):',
    '#',
    '#   mutation { createListFeature(input: {entityType: "user",',
    '#     name: "reading_history", valueType: STRING,',
    '#     ttlSeconds: 2592000}) { key } }',
    '#   mutation { addListItems(list: {entityType: "user",',
    '#     entityId: "u1", feature: "reading_history"},',
    '#     items: [{value: "story1"}, {value: "story2"}]) { added } }',
    '#',
    '# Next page: pass endCursor as $after. To send a token, add',
    '# {"Authorization": "Bearer …"} under Headers.',
    'query ReadingHistory(',
    '  $type: String!, $id: ID!, $feature: String!, $after: String',
    ') {',
    '  entity(type: $type, entityId: $id) {',
    '    id',
    '    list(feature: $feature, limit: 10, after: $after) {',
    '      items { value timestamp expiresAt cursor }',
    '      hasMore',
    '      endCursor',
    '    }',
    '  }',
    '}',
    ''
  ].join('\n');
  // GraphiQL takes its first variables from this prop or from what it stored
  // last time; only a first visit gets the example's.
  var variables = localStorage.getItem('graphiql:variables') === null
    ? JSON.stringify({ type: 'user', id: 'u1', feature: 'reading_history' }, null, 2)
    : undefined;
  var fetcher = GraphiQL.createFetcher({ url: new URL('/graphql', window.location.href).href });
  ReactDOM.createRoot(document.getElementById('graphiql')).render(
    React.createElement(GraphiQL, {
      fetcher: fetcher,
      defaultQuery: example,
      variables: variables,
      defaultEditorToolsVisibility: 'variables',
      shouldPersistHeaders: true
    })
  );
})();
