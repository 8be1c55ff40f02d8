// changefeed_pooler in a connection string, without a server: taken out
// before libpq sees the string, in both of libpq's forms, and refused when
// its value means nothing.
#include "core/connection_string.hpp"

#include <changefeed/error.hpp>

#include <gtest/gtest.h>

using changefeed::detail::connection_target;

TEST(ConnectionString, WithoutTheKeywordTheStringIsUntouched) {
    for (const char* s : {"", "host=db1 dbname=app", "  host = 'a b'  port=5432 ", "postgresql://u@h/db?sslmode=off"}) {
        auto t = connection_target(s);
        EXPECT_EQ(t.libpq, s);
        EXPECT_FALSE(t.transaction_pooler);
    }
}

TEST(ConnectionString, KeyValueFormLosesOnlyTheKeyword) {
    auto t = connection_target("host=127.0.0.1 changefeed_pooler=transaction port=6432 application_name='a b\\'c'");
    EXPECT_TRUE(t.transaction_pooler);
    EXPECT_EQ(t.libpq, "host=127.0.0.1 port=6432 application_name='a b\\'c'");
    t = connection_target("changefeed_pooler = 'transaction'");
    EXPECT_TRUE(t.transaction_pooler);
    EXPECT_EQ(t.libpq, "");
    // A quoted value that holds the keyword is a value, not the keyword.
    t = connection_target("application_name='changefeed_pooler=transaction'");
    EXPECT_FALSE(t.transaction_pooler);
    EXPECT_EQ(t.libpq, "application_name='changefeed_pooler=transaction'");
}

TEST(ConnectionString, UriFormLosesOnlyTheParameter) {
    auto t = connection_target("postgresql://app@db:6432/shop?changefeed_pooler=transaction&sslmode=disable");
    EXPECT_TRUE(t.transaction_pooler);
    EXPECT_EQ(t.libpq, "postgresql://app@db:6432/shop?sslmode=disable");
    t = connection_target("postgres://db/shop?changefeed_pooler=transaction");
    EXPECT_TRUE(t.transaction_pooler);
    EXPECT_EQ(t.libpq, "postgres://db/shop");
}

TEST(ConnectionString, SessionAndNoneChangeNothing) {
    EXPECT_FALSE(connection_target("host=h changefeed_pooler=session").transaction_pooler);
    EXPECT_EQ(connection_target("host=h changefeed_pooler=none").libpq, "host=h");
}

TEST(ConnectionString, AnotherValueIsRefused) {
    try {
        connection_target("host=h changefeed_pooler=statement");
        FAIL() << "accepted";
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), make_error_code(changefeed::errc::invalid_option));
        EXPECT_NE(std::string(e.what()).find("transaction, session or none"), std::string::npos) << e.what();
    }
}
