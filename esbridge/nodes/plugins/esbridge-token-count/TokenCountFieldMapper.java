package org.esbridge.mapper;

import org.apache.lucene.analysis.Analyzer;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.tokenattributes.PositionIncrementAttribute;
import org.elasticsearch.index.analysis.NamedAnalyzer;
import org.elasticsearch.index.mapper.DocValueFetcher;
import org.elasticsearch.index.mapper.DocumentParserContext;
import org.elasticsearch.index.mapper.FieldMapper;
import org.elasticsearch.index.mapper.MappedFieldType;
import org.elasticsearch.index.mapper.MapperBuilderContext;
import org.elasticsearch.index.mapper.MapperParsingException;
import org.elasticsearch.index.mapper.NumberFieldMapper;
import org.elasticsearch.index.mapper.ValueFetcher;
import org.elasticsearch.index.query.SearchExecutionContext;

import java.io.IOException;
import java.util.Map;

/**
 * {@code token_count}: indexes the number of tokens the given analyzer makes of a string as an integer
 * (parameters analyzer, enable_position_increments, index, doc_values, store, meta).
 */
public class TokenCountFieldMapper extends FieldMapper {
    public static final String CONTENT_TYPE = "token_count";
    public static final TypeParser PARSER = new TypeParser((name, ctx) -> new Builder(name));

    private static TokenCountFieldMapper self(FieldMapper m) {
        return (TokenCountFieldMapper) m;
    }

    public static class Builder extends FieldMapper.Builder {
        private final Parameter<Boolean> index = Parameter.indexParam(m -> self(m).index, true);
        private final Parameter<Boolean> docValues = Parameter.docValuesParam(m -> self(m).docValues, true);
        private final Parameter<Boolean> store = Parameter.storeParam(m -> self(m).store, false);
        private final Parameter<NamedAnalyzer> analyzer = Parameter.analyzerParam("analyzer", true, m -> self(m).analyzer, () -> null);
        private final Parameter<Boolean> positionIncrements = Parameter.boolParam(
            "enable_position_increments", false, m -> self(m).positionIncrements, true);
        private final Parameter<Map<String, String>> meta = Parameter.metaParam();

        public Builder(String name) {
            super(name);
        }

        @Override
        protected Parameter<?>[] getParameters() {
            return new Parameter<?>[] { index, docValues, store, analyzer, positionIncrements, meta };
        }

        @Override
        public TokenCountFieldMapper build(MapperBuilderContext context) {
            if (analyzer.getValue() == null) {
                throw new MapperParsingException("token_count field [" + leafName() + "] needs an analyzer");
            }
            MappedFieldType ft = new FieldType(context.buildFullName(leafName()), index.getValue(), store.getValue(),
                docValues.getValue(), meta.getValue());
            return new TokenCountFieldMapper(leafName(), ft, builderParams(this, context), this);
        }
    }

    static final class FieldType extends NumberFieldMapper.NumberFieldType {
        FieldType(String name, boolean indexed, boolean stored, boolean docValues, Map<String, String> meta) {
            super(name, NumberFieldMapper.NumberType.INTEGER, indexed, stored, docValues, false, null, meta, null, false, null, null,
                false);
        }

        @Override
        public ValueFetcher valueFetcher(SearchExecutionContext context, String format) {
            // the source holds the text, not the count: read the count from doc values
            if (hasDocValues() == false) return ValueFetcher.EMPTY;
            return new DocValueFetcher(docValueFormat(format, null), context.getForField(this, FielddataOperation.SEARCH));
        }
    }

    private final boolean index, docValues, store, positionIncrements;
    private final NamedAnalyzer analyzer;

    private TokenCountFieldMapper(String leafName, MappedFieldType ft, BuilderParams params, Builder b) {
        super(leafName, ft, params);
        this.index = b.index.getValue();
        this.docValues = b.docValues.getValue();
        this.store = b.store.getValue();
        this.analyzer = b.analyzer.getValue();
        this.positionIncrements = b.positionIncrements.getValue();
    }

    @Override
    protected void parseCreateField(DocumentParserContext context) throws IOException {
        String value = context.parser().textOrNull();
        if (value == null) return;
        int count = count(analyzer, fieldType().name(), value, positionIncrements);
        NumberFieldMapper.NumberType.INTEGER.addFields(context.doc(), fieldType().name(), count, index, docValues, store);
    }

    /** Tokens (or, with position increments, positions including gaps) of value under analyzer. */
    static int count(Analyzer analyzer, String field, String value, boolean positionIncrements) throws IOException {
        int n = 0;
        try (TokenStream ts = analyzer.tokenStream(field, value)) {
            PositionIncrementAttribute pos = ts.addAttribute(PositionIncrementAttribute.class);
            ts.reset();
            while (ts.incrementToken()) {
                n += positionIncrements ? pos.getPositionIncrement() : Math.min(1, pos.getPositionIncrement());
            }
            ts.end();
            if (positionIncrements) n += pos.getPositionIncrement();
        }
        return n;
    }

    @Override
    protected String contentType() {
        return CONTENT_TYPE;
    }

    @Override
    public FieldMapper.Builder getMergeBuilder() {
        return new Builder(leafName()).init(this);
    }
}
