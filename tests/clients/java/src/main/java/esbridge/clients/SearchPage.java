package esbridge.clients;

import jakarta.json.Json;
import jakarta.json.JsonArrayBuilder;
import jakarta.json.JsonNumber;
import jakarta.json.JsonObject;
import jakarta.json.JsonObjectBuilder;
import java.io.StringReader;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.hc.core5.http.EntityDetails;
import org.apache.hc.core5.http.Header;
import org.apache.hc.core5.http.HttpHost;
import org.apache.hc.core5.http.message.BasicHeader;
import org.opensearch.client.json.JsonData;
import org.opensearch.client.opensearch.OpenSearchClient;
import org.opensearch.client.opensearch._types.FieldValue;
import org.opensearch.client.opensearch._types.aggregations.StringTermsBucket;
import org.opensearch.client.opensearch._types.query_dsl.Operator;
import org.opensearch.client.opensearch.core.SearchResponse;
import org.opensearch.client.opensearch.core.search.Hit;
import org.opensearch.client.transport.httpclient5.ApacheHttpClient5Transport;
import org.opensearch.client.transport.httpclient5.ApacheHttpClient5TransportBuilder;

/**
 * The pages of a shop's search sent by opensearch-java (its typed API, over its Apache HttpClient 5
 * transport with request compression on) to the URL given: a match with operator AND on one field,
 * a range filter, a terms facet on a keyword field, highlighting, from/size paging.
 *
 * <p>Arguments: the server's URL and the search as a JSON object (index, field, text, filter_field,
 * filter_max, facet, facet_field, froms: the first hit of each page, size). The environment variable
 * ESBRIDGE_TEST_HEADERS holds the headers to send with every request (a JSON object; the credentials,
 * if any). Prints one JSON object: each page's hits in order (id, score, highlight), total and facet
 * buckets, and what went over the wire with each request in turn (the request's and the answer's
 * Content-Encoding, the answer's X-Esbridge-Reranked).
 */
public final class SearchPage {
    /** The attribute of a request's context saying that it is one of the searches. */
    private static final String SEARCH = "esbridge.test.search";

    private SearchPage() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: SearchPage URL SEARCH_JSON");
            System.exit(2);
        }
        HttpHost host = HttpHost.create(args[0]);
        JsonObject spec = Json.createReader(new StringReader(args[1])).readObject();
        String headersJson = System.getenv().getOrDefault("ESBRIDGE_TEST_HEADERS", "{}");
        JsonObject given = Json.createReader(new StringReader(headersJson)).readObject();
        List<Header> headers = new ArrayList<>();
        for (String name : given.keySet()) {
            headers.add(new BasicHeader(name, given.getString(name)));
        }

        // what the client's searches carry and what their answers carry, in turn, seen without
        // changing anything it does
        List<String> requestEncodings = Collections.synchronizedList(new ArrayList<>());
        List<String> responseEncodings = Collections.synchronizedList(new ArrayList<>());
        List<String> reranked = Collections.synchronizedList(new ArrayList<>());
        ApacheHttpClient5Transport transport = ApacheHttpClient5TransportBuilder.builder(host)
                .setCompressionEnabled(true)
                .setDefaultHeaders(headers.toArray(new Header[0]))
                .setHttpClientConfigCallback(builder -> builder
                        .addRequestInterceptorLast((request, entity, context) -> {
                            boolean search = request.getPath().split("\\?", 2)[0].endsWith("/_search");
                            context.setAttribute(SEARCH, search);
                            if (search) {
                                requestEncodings.add(encodingOf(entity));
                            }
                        })
                        .addResponseInterceptorLast((response, entity, context) -> {
                            if (!Boolean.TRUE.equals(context.getAttribute(SEARCH))) {
                                return;
                            }
                            Header said = response.getFirstHeader("X-Esbridge-Reranked");
                            reranked.add(said == null ? "" : said.getValue());
                            responseEncodings.add(encodingOf(entity));
                        }))
                .build();
        try {
            OpenSearchClient client = new OpenSearchClient(transport);
            String index = spec.getString("index");
            String field = spec.getString("field");
            String facet = spec.getString("facet");
            JsonArrayBuilder pages = Json.createArrayBuilder();
            for (JsonNumber from : spec.getJsonArray("froms").getValuesAs(JsonNumber.class)) {
                SearchResponse<JsonData> response = client.search(s -> s
                        .index(index)
                        .query(q -> q.bool(b -> b
                                .must(m -> m.match(t -> t
                                        .field(field)
                                        .query(FieldValue.of(spec.getString("text")))
                                        .operator(Operator.And)))
                                .filter(f -> f.range(r -> r
                                        .field(spec.getString("filter_field"))
                                        .lte(JsonData.of(spec.getInt("filter_max")))))))
                        .aggregations(facet, a -> a.terms(t -> t.field(spec.getString("facet_field"))))
                        .highlight(h -> h.fields(field, f -> f))
                        .from(from.intValue())
                        .size(spec.getInt("size")),
                        JsonData.class);
                pages.add(pageOf(response, facet));
            }
            System.out.println(Json.createObjectBuilder()
                    .add("pages", pages)
                    .add("request_encodings", Json.createArrayBuilder(requestEncodings))
                    .add("response_encodings", Json.createArrayBuilder(responseEncodings))
                    .add("reranked", Json.createArrayBuilder(reranked))
                    .build());
        } finally {
            transport.close();
        }
    }

    /** The Content-Encoding of a request's or an answer's body ("" for none). */
    private static String encodingOf(EntityDetails entity) {
        return entity == null || entity.getContentEncoding() == null ? "" : entity.getContentEncoding();
    }

    /** One page of the answer: its hits (id, score, highlight), total and the facet's buckets. */
    private static JsonObject pageOf(SearchResponse<JsonData> response, String facet) {
        JsonArrayBuilder hits = Json.createArrayBuilder();
        for (Hit<JsonData> hit : response.hits().hits()) {
            JsonObjectBuilder highlight = Json.createObjectBuilder();
            hit.highlight().forEach((name, fragments) -> highlight.add(name, Json.createArrayBuilder(fragments)));
            hits.add(Json.createObjectBuilder()
                    .add("id", hit.id())
                    .add("score", hit.score())
                    .add("highlight", highlight));
        }
        JsonArrayBuilder buckets = Json.createArrayBuilder();
        for (StringTermsBucket bucket : response.aggregations().get(facet).sterms().buckets().array()) {
            buckets.add(Json.createArrayBuilder().add(bucket.key()).add(bucket.docCount()));
        }
        return Json.createObjectBuilder()
                .add("hits", hits)
                .add("total", Json.createObjectBuilder()
                        .add("value", response.hits().total().value())
                        .add("relation", response.hits().total().relation().jsonValue()))
                .add("buckets", buckets)
                .build();
    }
}
