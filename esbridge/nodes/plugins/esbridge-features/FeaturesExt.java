package org.esbridge.features;

import org.opensearch.core.common.io.stream.StreamInput; //@opensearch
import org.elasticsearch.common.io.stream.StreamInput; //@elasticsearch
import org.opensearch.core.common.io.stream.StreamOutput; //@opensearch
import org.elasticsearch.common.io.stream.StreamOutput; //@elasticsearch
import org.opensearch.core.xcontent.XContentBuilder; //@opensearch
import org.elasticsearch.xcontent.XContentBuilder; //@elasticsearch
import org.opensearch.core.xcontent.XContentParser; //@opensearch
import org.elasticsearch.xcontent.XContentParser; //@elasticsearch
import org.opensearch.search.SearchExtBuilder; //@opensearch
import org.elasticsearch.search.SearchExtBuilder; //@elasticsearch

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * {@code "ext": {"esbridge_features": {"groups": [{"fields": [F, ...], "terms": [T, ...]}, ...],
 * "stats": [{"field": F, "terms": [T, ...]}, ...], "tag": S}}}, or instead of groups and stats
 * {@code "analyze": {"text": S, "fields": [F, ...], "count": [F, ...]}}: the text analysed in each
 * field with the field's index analyzer, the statistics of its terms there, and for the fields of
 * {@code count} (some of {@code fields}; all of them if not given) one group of those terms each.
 *
 * The tag, any string, is returned with each hit's features, so that a caller holding hits can
 * tell which request they answer.
 *
 * A group names one field (a list, so that a later version may add fields up).
 */
public final class FeaturesExt extends SearchExtBuilder {
    public static final String NAME = "esbridge_features";

    /** One group: the fields added up and the terms to count in them. */
    public record Group(List<String> fields, List<String> terms) {
    }

    /** The terms whose statistics are wanted in one field. */
    public record Stats(String field, List<String> terms) {
    }

    /** A text to analyse in some fields; the features are counted in those of {@code count}. */
    public record Analyze(String text, List<String> fields, List<String> count) {
    }

    private final List<Group> groups;
    private final List<Stats> stats;
    private final String tag;
    /** null where the request names its terms itself */
    private final Analyze analyze;

    public FeaturesExt(List<Group> groups, List<Stats> stats, String tag, Analyze analyze) {
        this.groups = List.copyOf(groups);
        this.stats = List.copyOf(stats);
        this.tag = tag;
        this.analyze = analyze;
    }

    public FeaturesExt(StreamInput in) throws IOException {
        int n = in.readVInt();
        List<Group> gs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            gs.add(new Group(readStrings(in), readStrings(in)));
        }
        n = in.readVInt();
        List<Stats> ss = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            ss.add(new Stats(in.readString(), readStrings(in)));
        }
        this.groups = List.copyOf(gs);
        this.stats = List.copyOf(ss);
        this.tag = in.readString();
        this.analyze = in.readBoolean() ? new Analyze(in.readString(), readStrings(in), readStrings(in)) : null;
    }

    public String tag() {
        return tag;
    }

    /** The text to analyse, or null. */
    public Analyze analyze() {
        return analyze;
    }

    private static List<String> readStrings(StreamInput in) throws IOException {
        int n = in.readVInt();
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(in.readString());
        }
        return out;
    }

    private static void writeStrings(StreamOutput out, List<String> strings) throws IOException {
        out.writeVInt(strings.size());
        for (String s : strings) {
            out.writeString(s);
        }
    }

    public List<Group> groups() {
        return groups;
    }

    public List<Stats> stats() {
        return stats;
    }

    @Override
    public void writeTo(StreamOutput out) throws IOException {
        out.writeVInt(groups.size());
        for (Group g : groups) {
            writeStrings(out, g.fields());
            writeStrings(out, g.terms());
        }
        out.writeVInt(stats.size());
        for (Stats s : stats) {
            out.writeString(s.field());
            writeStrings(out, s.terms());
        }
        out.writeString(tag);
        out.writeBoolean(analyze != null);
        if (analyze != null) {
            out.writeString(analyze.text());
            writeStrings(out, analyze.fields());
            writeStrings(out, analyze.count());
        }
    }

    @Override
    public String getWriteableName() {
        return NAME;
    }

    @Override
    public XContentBuilder toXContent(XContentBuilder builder, Params params) throws IOException {
        builder.startObject(NAME);
        builder.startArray("groups");
        for (Group g : groups) {
            builder.startObject().field("fields", g.fields()).field("terms", g.terms()).endObject();
        }
        builder.endArray();
        builder.startArray("stats");
        for (Stats s : stats) {
            builder.startObject().field("field", s.field()).field("terms", s.terms()).endObject();
        }
        builder.endArray();
        builder.field("tag", tag);
        if (analyze != null) {
            builder.startObject("analyze").field("text", analyze.text()).field("fields", analyze.fields())
                .field("count", analyze.count()).endObject();
        }
        return builder.endObject();
    }

    /** The extension as a request gives it, within {@code limits}; {@code esbridge_features} must be
     * an object (null, a list, a string... refused, naming the shape expected). */
    public static FeaturesExt parse(XContentParser parser, FeaturesLimits limits) throws IOException {
        Object given = switch (parser.currentToken()) {
            case START_OBJECT -> parser.map();
            case START_ARRAY -> parser.list();
            case VALUE_NULL -> null;
            default -> parser.objectText();  // a string, number or boolean
        };
        return of(given, limits);
    }

    /** The shape the extension takes, for the messages that refuse another. */
    static final String SHAPE = "an object {\"groups\": [{\"fields\": [F], \"terms\": [T, ...]}, ...], "
        + "\"stats\": [{\"field\": F, \"terms\": [T, ...]}, ...], \"tag\": S} or {\"analyze\": "
        + "{\"text\": S, \"fields\": [F, ...], \"count\": [F, ...]}, \"tag\": S}";

    /** The extension of {@code value}, the value of {@code esbridge_features} as Java objects (a map
     * for a JSON object), within {@code limits}.
     *
     * @throws IllegalArgumentException what is wrong with it, or the limit it goes beyond */
    static FeaturesExt of(Object value, FeaturesLimits limits) {
        if (!(value instanceof Map<?, ?> asMap)) {
            throw new IllegalArgumentException("[" + NAME + "] must be " + SHAPE + ", got " + describe(value));
        }
        @SuppressWarnings("unchecked")
        Map<String, Object> body = (Map<String, Object>) asMap;
        for (String key : body.keySet()) {
            if (!key.equals("groups") && !key.equals("stats") && !key.equals("tag") && !key.equals("analyze")) {
                throw new IllegalArgumentException("[" + NAME + "] has no parameter [" + key
                    + "]; it takes [groups], [stats], [analyze] and [tag]");
            }
        }
        List<Group> groups = new ArrayList<>();
        for (Map<String, Object> g : objects(body.get("groups"), "groups")) {
            List<String> fields = strings(g.get("fields"), "groups.fields");
            if (fields.size() != 1) {
                throw new IllegalArgumentException("[" + NAME + "] a group names exactly one field, got " + fields);
            }
            groups.add(new Group(fields, strings(g.get("terms"), "groups.terms")));
        }
        List<Stats> stats = new ArrayList<>();
        for (Map<String, Object> s : objects(body.get("stats"), "stats")) {
            Object field = s.get("field");
            if (!(field instanceof String f) || f.isEmpty()) {
                throw new IllegalArgumentException("[" + NAME + "] stats.field must be a field name");
            }
            stats.add(new Stats(f, strings(s.get("terms"), "stats.terms")));
        }
        Object tag = body.getOrDefault("tag", "");
        if (!(tag instanceof String t)) {
            throw new IllegalArgumentException("[" + NAME + "] tag must be a string");
        }
        Analyze analyze = null;
        if (body.get("analyze") != null) {
            if (!groups.isEmpty() || !stats.isEmpty()) {
                throw new IllegalArgumentException("[" + NAME + "] takes [analyze] or [groups] and [stats], not both");
            }
            if (!(body.get("analyze") instanceof Map<?, ?> given)) {
                throw new IllegalArgumentException("[" + NAME + "] analyze must be an object");
            }
            @SuppressWarnings("unchecked")
            Map<String, Object> a = (Map<String, Object>) given;
            for (String key : a.keySet()) {
                if (!key.equals("text") && !key.equals("fields") && !key.equals("count")) {
                    throw new IllegalArgumentException("[" + NAME + "] analyze has no parameter [" + key
                        + "]; it takes [text], [fields] and [count]");
                }
            }
            if (!(a.get("text") instanceof String text)) {
                throw new IllegalArgumentException("[" + NAME + "] analyze.text must be a string");
            }
            List<String> fields = strings(a.get("fields"), "analyze.fields");
            if (fields.isEmpty()) {
                throw new IllegalArgumentException("[" + NAME + "] analyze.fields must name at least one field");
            }
            List<String> count = a.containsKey("count") ? strings(a.get("count"), "analyze.count") : fields;
            for (String f : count) {
                if (!fields.contains(f)) {
                    throw new IllegalArgumentException("[" + NAME + "] analyze.count names [" + f
                        + "], which is not one of analyze.fields " + fields);
                }
            }
            analyze = new Analyze(text, fields, count);
        }
        limits.check(groups, stats, analyze);
        return new FeaturesExt(groups, stats, t, analyze);
    }

    /** What a JSON value is, in words. */
    static String describe(Object value) {
        if (value == null) {
            return "null";
        } else if (value instanceof List<?>) {
            return "a list";
        } else if (value instanceof String) {
            return "a string";
        } else if (value instanceof Number) {
            return "a number";
        } else if (value instanceof Boolean) {
            return "a boolean";
        }
        return "a value of type " + value.getClass().getSimpleName();
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> objects(Object value, String what) {
        List<Map<String, Object>> out = new ArrayList<>();
        if (value == null) {
            return out;
        }
        if (!(value instanceof List<?> list)) {
            throw new IllegalArgumentException("[" + NAME + "] " + what + " must be a list of objects");
        }
        for (Object item : list) {
            if (!(item instanceof Map<?, ?>)) {
                throw new IllegalArgumentException("[" + NAME + "] " + what + " must be a list of objects");
            }
            out.add((Map<String, Object>) item);
        }
        return out;
    }

    private static List<String> strings(Object value, String what) {
        List<String> out = new ArrayList<>();
        if (value == null) {
            return out;
        }
        if (!(value instanceof List<?> list)) {
            throw new IllegalArgumentException("[" + NAME + "] " + what + " must be a list of strings");
        }
        for (Object item : list) {
            if (!(item instanceof String s)) {
                throw new IllegalArgumentException("[" + NAME + "] " + what + " must be a list of strings");
            }
            out.add(s);
        }
        return out;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof FeaturesExt other && groups.equals(other.groups) && stats.equals(other.stats)
            && tag.equals(other.tag) && Objects.equals(analyze, other.analyze);
    }

    @Override
    public int hashCode() {
        return Objects.hash(groups, stats, tag, analyze);
    }
}
