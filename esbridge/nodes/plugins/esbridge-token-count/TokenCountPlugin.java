package org.esbridge.mapper;

import org.elasticsearch.index.mapper.Mapper;
import org.elasticsearch.plugins.MapperPlugin;
import org.elasticsearch.plugins.Plugin;

import java.util.Map;

/** Registers the {@code token_count} field type. */
public class TokenCountPlugin extends Plugin implements MapperPlugin {
    @Override
    public Map<String, Mapper.TypeParser> getMappers() {
        return Map.of(TokenCountFieldMapper.CONTENT_TYPE, TokenCountFieldMapper.PARSER);
    }
}
